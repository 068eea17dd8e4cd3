package validate

import (
	"path"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// kinds are the documents the deployment files may hold, by apiVersion and
// kind; each decodes into a fresh value of its type.
var kinds = map[string]func() any{
	"v1/Service":                                    func() any { return new(corev1.Service) },
	"v1/Secret":                                     func() any { return new(corev1.Secret) },
	"v1/ConfigMap":                                  func() any { return new(corev1.ConfigMap) },
	"v1/PersistentVolumeClaim":                      func() any { return new(corev1.PersistentVolumeClaim) },
	"v1/ServiceAccount":                             func() any { return new(corev1.ServiceAccount) },
	"apps/v1/Deployment":                            func() any { return new(appsv1.Deployment) },
	"apps/v1/StatefulSet":                           func() any { return new(appsv1.StatefulSet) },
	"policy/v1/PodDisruptionBudget":                 func() any { return new(policyv1.PodDisruptionBudget) },
	"leaderworkerset.x-k8s.io/v1/LeaderWorkerSet":   func() any { return new(leaderWorkerSet) },
	"monitoring.coreos.com/v1/PodMonitor":           func() any { return new(podMonitor) },
	"kustomize.config.k8s.io/v1beta1/Kustomization": func() any { return new(kustomization) },
}

// apiKinds are the kinds a cluster knows without extra controllers (the
// LeaderWorkerSet controller is the one the README installs first): only
// these may sit in a folder meant for `kubectl apply -f`.
var apiKinds = map[string]bool{
	"v1/Service": true, "v1/Secret": true, "v1/ConfigMap": true, "v1/PersistentVolumeClaim": true,
	"v1/ServiceAccount": true, "apps/v1/Deployment": true, "apps/v1/StatefulSet": true,
	"policy/v1/PodDisruptionBudget": true, "leaderworkerset.x-k8s.io/v1/LeaderWorkerSet": true,
}

// leaderWorkerSet is LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) as far as
// these files use it: the top-level fields as the project's API types
// declare them, the templates as core/v1 PodTemplateSpecs.
type leaderWorkerSet struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Replicas             *int32 `json:"replicas,omitempty"`
		LeaderWorkerTemplate struct {
			LeaderTemplate                       *corev1.PodTemplateSpec                                 `json:"leaderTemplate,omitempty"`
			WorkerTemplate                       corev1.PodTemplateSpec                                  `json:"workerTemplate"`
			Size                                 *int32                                                  `json:"size,omitempty"`
			RestartPolicy                        string                                                  `json:"restartPolicy,omitempty"`
			SubGroupPolicy                       *lwsSubGroupPolicy                                      `json:"subGroupPolicy,omitempty"`
			VolumeClaimTemplates                 []corev1.PersistentVolumeClaim                          `json:"volumeClaimTemplates,omitempty"`
			PersistentVolumeClaimRetentionPolicy *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy `json:"persistentVolumeClaimRetentionPolicy,omitempty"`
		} `json:"leaderWorkerTemplate"`
		RolloutStrategy *struct {
			Type                       string `json:"type"`
			RollingUpdateConfiguration *struct {
				Partition      *int32             `json:"partition,omitempty"`
				MaxUnavailable intstr.IntOrString `json:"maxUnavailable,omitempty"`
				MaxSurge       intstr.IntOrString `json:"maxSurge,omitempty"`
			} `json:"rollingUpdateConfiguration,omitempty"`
		} `json:"rolloutStrategy,omitempty"`
		StartupPolicy string `json:"startupPolicy,omitempty"`
		NetworkConfig *struct {
			SubdomainPolicy *string `json:"subdomainPolicy"`
		} `json:"networkConfig,omitempty"`
	} `json:"spec"`
}

type lwsSubGroupPolicy struct {
	Type         *string `json:"subGroupPolicyType,omitempty"`
	SubGroupSize *int32  `json:"subGroupSize,omitempty"`
}

// podMonitor is the Prometheus Operator's PodMonitor, the fields these
// files may use.
type podMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		PodTargetLabels   []string             `json:"podTargetLabels,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *struct {
			Any        bool     `json:"any,omitempty"`
			MatchNames []string `json:"matchNames,omitempty"`
		} `json:"namespaceSelector,omitempty"`
		PodMetricsEndpoints []struct {
			Port          string `json:"port,omitempty"`
			Path          string `json:"path,omitempty"`
			Scheme        string `json:"scheme,omitempty"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// kustomization is kustomize's Kustomization, the fields these files may
// use.
type kustomization struct {
	metav1.TypeMeta `json:",inline"`
	Namespace       string   `json:"namespace,omitempty"`
	Resources       []string `json:"resources,omitempty"`
	SecretGenerator []struct {
		Name     string   `json:"name"`
		Type     string   `json:"type,omitempty"`
		Files    []string `json:"files,omitempty"`
		Literals []string `json:"literals,omitempty"`
		Behavior string   `json:"behavior,omitempty"`
	} `json:"secretGenerator,omitempty"`
	GeneratorOptions *struct {
		DisableNameSuffixHash bool              `json:"disableNameSuffixHash,omitempty"`
		Labels                map[string]string `json:"labels,omitempty"`
		Annotations           map[string]string `json:"annotations,omitempty"`
	} `json:"generatorOptions,omitempty"`
}

// docSep is a YAML document separator line.
var docSep = regexp.MustCompile(`(?m)^---[ \t]*(?:#.*)?$`)

// documents splits a YAML stream, dropping documents of comments alone.
func documents(text string) []string {
	var out []string
	for _, d := range docSep.Split(text, -1) {
		empty := true
		for _, l := range strings.Split(d, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
				break
			}
		}
		if !empty {
			out = append(out, d)
		}
	}
	return out
}

// decodeStrict decodes one YAML document into v as the API server would
// refuse it: duplicate keys, unknown fields and fields in the wrong case
// are errors (encoding/json alone would accept the last).
func decodeStrict(doc string, v any) []error {
	j, err := yaml.YAMLToJSONStrict([]byte(doc))
	if err != nil {
		return []error{err}
	}
	strict, err := kjson.UnmarshalStrict(j, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return []error{err}
	}
	return strict
}

// object is one decoded Kubernetes document.
type object struct {
	file, gvk, name string
	v               any
}

// kubernetes decodes every YAML file of kubernetes/ and prometheus/, and
// gathers the pods, Services and Secrets they declare.
func (c *checker) kubernetes() error {
	var objs []object
	for _, f := range c.files(`^(kubernetes/.*|prometheus/.*)\.ya?ml$`) {
		if f.name == "prometheus/prometheus.yml" {
			continue // not a Kubernetes document: prometheus()
		}
		docs := documents(f.text)
		if len(docs) == 0 {
			c.problem(f.name, "holds no YAML document")
		}
		for i, d := range docs {
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(d), &tm); err != nil {
				c.problem(f.name, "document %d: %v", i+1, err)
				continue
			}
			gvk := tm.APIVersion + "/" + tm.Kind
			mk, ok := kinds[gvk]
			if !ok {
				c.problem(f.name, "document %d: unknown kind %q (apiVersion %q): deploy/validate checks only the kinds it knows", i+1, tm.Kind, tm.APIVersion)
				continue
			}
			v := mk()
			if errs := decodeStrict(d, v); len(errs) > 0 {
				for _, e := range errs {
					c.problem(f.name, "document %d (%s): %v", i+1, tm.Kind, e)
				}
				continue
			}
			objs = append(objs, object{file: f.name, gvk: gvk, name: nameOf(v), v: v})
		}
	}
	// `kubectl apply -f DIR` sends every .yaml of DIR to the API server: a
	// document of a kind it does not serve fails that command.
	for _, o := range objs {
		if strings.HasPrefix(o.file, "kubernetes/") && !apiKinds[o.gvk] && !onlyKustomizations(objs, path.Dir(o.file)) {
			c.problem(o.file, "a %s beside the manifests of %s/ breaks `kubectl apply -f %s/`: give it a folder of its own", o.gvk, path.Dir(o.file), path.Dir(o.file))
		}
		if o.name == "" && o.gvk != "kustomize.config.k8s.io/v1beta1/Kustomization" {
			c.problem(o.file, "a %s without metadata.name", o.gvk)
		}
	}
	for _, o := range objs {
		c.gather(o)
	}
	return nil
}

// onlyKustomizations reports whether dir holds Kustomizations alone (a
// folder for `kubectl apply -k`).
func onlyKustomizations(objs []object, dir string) bool {
	for _, o := range objs {
		if path.Dir(o.file) == dir && o.gvk != "kustomize.config.k8s.io/v1beta1/Kustomization" {
			return false
		}
	}
	return true
}

func nameOf(v any) string {
	switch o := v.(type) {
	case *corev1.Service:
		return o.Name
	case *corev1.Secret:
		return o.Name
	case *corev1.ConfigMap:
		return o.Name
	case *corev1.PersistentVolumeClaim:
		return o.Name
	case *corev1.ServiceAccount:
		return o.Name
	case *appsv1.Deployment:
		return o.Name
	case *appsv1.StatefulSet:
		return o.Name
	case *policyv1.PodDisruptionBudget:
		return o.Name
	case *leaderWorkerSet:
		return o.Metadata.Name
	case *podMonitor:
		return o.Metadata.Name
	}
	return ""
}

// gather records what one object declares and checks what it can alone.
func (c *checker) gather(o object) {
	switch v := o.v.(type) {
	case *corev1.Service:
		c.services = append(c.services, &service{file: o.file, svc: v})
	case *corev1.Secret:
		keys := map[string]bool{}
		for k := range v.Data {
			keys[k] = true
		}
		for k := range v.StringData {
			keys[k] = true
		}
		c.secretsMade[v.Name] = keys
		if len(v.Data)+len(v.StringData) > 0 {
			c.problem(o.file, "Secret %s holds a value: commit no secret, generate it (see deploy/README.md)", v.Name)
		}
	case *appsv1.Deployment:
		c.workload(o.file, "Deployment "+v.Name, v.Spec.Selector, &v.Spec.Template)
	case *appsv1.StatefulSet:
		p := c.workload(o.file, "StatefulSet "+v.Name, v.Spec.Selector, &v.Spec.Template)
		replicas := int32(1)
		if v.Spec.Replicas != nil {
			replicas = *v.Spec.Replicas
		}
		if p != nil {
			p.statefulSet, p.replicas = v, replicas
		}
	case *leaderWorkerSet:
		c.leaderWorkerSet(o.file, v)
	case *podMonitor:
		c.podMonitors = append(c.podMonitors, podMonitorAt{o.file, v})
	case *kustomization:
		c.kustomization(o.file, v)
	}
}

// workload checks a Deployment's or StatefulSet's selector against its
// template and records the template.
func (c *checker) workload(file, where string, sel *metav1.LabelSelector, t *corev1.PodTemplateSpec) *pod {
	if sel == nil || len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		c.problem(file, "%s: spec.selector is required", where)
	} else if s, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		c.problem(file, "%s: spec.selector: %v", where, err)
	} else if !s.Matches(labels.Set(t.Labels)) {
		c.problem(file, "%s: spec.selector %s does not select its template's labels %v (the API server refuses it)", where, s, t.Labels)
	}
	return c.addPod(file, where, t)
}

func (c *checker) leaderWorkerSet(file string, l *leaderWorkerSet) {
	where := "LeaderWorkerSet " + l.Metadata.Name
	s := &l.Spec
	t := &s.LeaderWorkerTemplate
	oneOf := func(field, v string, allowed ...string) {
		for _, a := range allowed {
			if v == a {
				return
			}
		}
		c.problem(file, "%s: %s %q is not one of %s", where, field, v, strings.Join(allowed, ", "))
	}
	if s.StartupPolicy != "" {
		oneOf("startupPolicy", s.StartupPolicy, "LeaderCreated", "LeaderReady")
	}
	if t.RestartPolicy != "" {
		oneOf("restartPolicy", t.RestartPolicy, "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None", "Default")
	}
	if s.RolloutStrategy != nil {
		oneOf("rolloutStrategy.type", s.RolloutStrategy.Type, "RollingUpdate")
	}
	if s.NetworkConfig != nil && s.NetworkConfig.SubdomainPolicy != nil {
		oneOf("networkConfig.subdomainPolicy", *s.NetworkConfig.SubdomainPolicy, "Shared", "UniquePerReplica")
	}
	if s.Replicas != nil && *s.Replicas < 0 {
		c.problem(file, "%s: replicas %d is negative", where, *s.Replicas)
	}
	size := int32(1)
	if t.Size != nil {
		size = *t.Size
	}
	if size < 2 {
		c.problem(file, "%s: size %d: a braid cluster under LeaderWorkerSet has a leader and at least one worker", where, size)
	}
	if t.LeaderTemplate == nil {
		c.problem(file, "%s: no leaderTemplate: the leader would run the worker template (braid worker), and nothing would serve", where)
		return
	}
	info := &lwsInfo{file: file, name: l.Metadata.Name, size: int(size), startup: s.StartupPolicy,
		leader: c.addPod(file, where+" leaderTemplate", t.LeaderTemplate),
		worker: c.addPod(file, where+" workerTemplate", &t.WorkerTemplate)}
	info.leader.lws, info.worker.lws = info, info
	c.lwsSets = append(c.lwsSets, info)
}

// kustomization records the Secrets a generator makes; the files it reads
// are the user's to write, and must be kept out of the repository.
func (c *checker) kustomization(file string, k *kustomization) {
	dir := path.Dir(file)
	for _, g := range k.SecretGenerator {
		keys := map[string]bool{}
		for _, f := range g.Files {
			key, src, ok := strings.Cut(f, "=")
			if !ok {
				key, src = path.Base(f), f
			}
			keys[key] = true
			rel := path.Join(dir, src)
			c.claimed[rel] = true // the user's secret, when it is there
			if !c.userMade(rel) {
				c.problem(file, "secretGenerator %s reads %s, which no .gitignore beside it keeps out of the repository", g.Name, src)
			}
		}
		for _, l := range g.Literals {
			key, _, _ := strings.Cut(l, "=")
			keys[key] = true
			c.problem(file, "secretGenerator %s has a literal %s: commit no secret, read it from a file the user writes", g.Name, key)
		}
		c.secretsMade[g.Name] = keys
		if k.GeneratorOptions == nil || !k.GeneratorOptions.DisableNameSuffixHash {
			c.problem(file, "secretGenerator %s: without generatorOptions.disableNameSuffixHash the Secret is named %s-<hash>, which the manifests (applied apart) do not mount", g.Name, g.Name)
		}
	}
	for _, r := range k.Resources {
		c.problem(file, "resources %s: this kustomization only makes the Secret; the manifests are applied with -f", r)
	}
	if _, ok := c.file(path.Join(dir, ".gitignore")); !ok && len(k.SecretGenerator) > 0 {
		c.problem(file, "no .gitignore beside it keeps the secret's file out of the repository")
	}
}

// selects reports whether a selector's labels are all among labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}
