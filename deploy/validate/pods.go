package validate

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// pod is a pod template of the manifests.
type pod struct {
	file, where string
	dir         string // the flavour: the folder applied as one
	labels      map[string]string
	spec        *corev1.PodSpec
	braid       *corev1.Container // the container that runs braid, if any
	args        *braidArgs
	lws         *lwsInfo
	statefulSet *appsv1.StatefulSet
	replicas    int32
}

type lwsInfo struct {
	file, name     string
	size           int
	startup        string
	leader, worker *pod
}

type service struct {
	file string
	svc  *corev1.Service
}

type secretUse struct{ file, where, secret, key string }

type podMonitorAt struct {
	file string
	pm   *podMonitor
}

// minStartup is how long the leader's startup probe must allow: loading a
// 100 GB model takes minutes.
const minStartup = 30 * time.Minute

// addPod records a pod template and checks it on its own.
func (c *checker) addPod(file, where string, t *corev1.PodTemplateSpec) *pod {
	p := &pod{file: file, where: where, dir: path.Dir(file), labels: t.Labels, spec: &t.Spec}
	vols := map[string]*corev1.Volume{}
	for i := range t.Spec.Volumes {
		v := &t.Spec.Volumes[i]
		if vols[v.Name] != nil {
			c.problem(file, "%s: two volumes named %s", where, v.Name)
		}
		vols[v.Name] = v
	}
	all := append(append([]corev1.Container{}, t.Spec.InitContainers...), t.Spec.Containers...)
	for i := range all {
		ctr := &all[i]
		for _, m := range ctr.VolumeMounts {
			if vols[m.Name] == nil {
				c.problem(file, "%s: container %s mounts volume %s, which the pod does not declare", where, ctr.Name, m.Name)
			}
		}
	}
	for i := range t.Spec.Containers {
		ctr := &t.Spec.Containers[i]
		argv := braidArgv(ctr)
		if argv == nil {
			continue
		}
		if p.braid != nil {
			c.problem(file, "%s: two containers run braid", where)
			continue
		}
		argv = c.expandEnv(file, where, ctr, argv)
		a, err := c.parseBraid(file, where, argv)
		if err != nil {
			c.problem(file, "%s: %v", where, err)
			continue
		}
		if a == nil {
			continue
		}
		p.braid, p.args = ctr, a
		if c.images == nil {
			c.images = map[string][]string{}
		}
		c.images[p.dir] = append(c.images[p.dir], ctr.Image)
	}
	if p.braid != nil {
		c.checkBraidPod(p, vols)
	}
	c.pods = append(c.pods, p)
	return p
}

// braidArgv is the command line after "braid" when the container runs
// braid: a command of braid, or no command and the image's entrypoint
// (braid, in the images of deploy/container/).
func braidArgv(ctr *corev1.Container) []string {
	if len(ctr.Command) > 0 {
		if path.Base(ctr.Command[0]) != "braid" {
			return nil
		}
		return append(append([]string{}, ctr.Command[1:]...), ctr.Args...)
	}
	if strings.Contains(ctr.Image, "braid") && len(ctr.Args) > 0 {
		return append([]string{}, ctr.Args...)
	}
	return nil
}

var envRef = regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expandEnv does what the kubelet does to command and args: $(VAR) becomes
// the container's env VAR. An undefined VAR stays as written, silently, in
// Kubernetes: here it is a problem.
func (c *checker) expandEnv(file, where string, ctr *corev1.Container, argv []string) []string {
	env := map[string]string{}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = "default"
		default:
			env[e.Name] = strings.ToLower(e.Name)
		}
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = envRef.ReplaceAllStringFunc(a, func(m string) string {
			if m == "$$" {
				return "$"
			}
			name := m[2 : len(m)-1]
			v, ok := env[name]
			if !ok {
				c.problem(file, "%s: %s refers to $(%s), which the container's env does not define (Kubernetes would pass it as written)", where, a, name)
				return m
			}
			return v
		})
	}
	return out
}

// portRef resolves a probe's or Service's port (a name or a number) among
// a container's declared ports.
func portRef(ctr *corev1.Container, p intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range ctr.Ports {
		if p.Type == intstr.String && cp.Name == p.StrVal || p.Type == intstr.Int && cp.ContainerPort == p.IntVal {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// checkBraidPod checks a pod that runs braid: its flags against its ports,
// probes, volumes and resources.
func (c *checker) checkBraidPod(p *pod, vols map[string]*corev1.Volume) {
	f, w, ctr, a := p.file, p.where, p.braid, p.args
	names := map[string]bool{}
	for _, cp := range ctr.Ports {
		if cp.Name != "" && names[cp.Name] {
			c.problem(f, "%s: two ports named %s", w, cp.Name)
		}
		names[cp.Name] = true
		if len(cp.Name) > 15 {
			c.problem(f, "%s: port name %s is longer than 15 characters", w, cp.Name)
		}
	}
	// listen checks that a listen flag uses a declared port of that name.
	listen := func(flag, portName string) (int, bool) {
		addr := a.value(flag)
		if a.unknown[flag] {
			return 0, false // reported as unknown
		}
		if addr == "" {
			c.problem(f, "%s: braid %s without --%s", w, a.command, flag)
			return 0, false
		}
		port, ok := portOfAddr(addr)
		if !ok {
			c.problem(f, "%s: --%s %q has no port", w, flag, addr)
			return 0, false
		}
		if h := addr[:strings.LastIndex(addr, ":")]; h == "127.0.0.1" || h == "localhost" || h == "[::1]" {
			c.problem(f, "%s: --%s %s is loopback: nothing outside the pod reaches it", w, flag, addr)
		}
		cp, ok := portRef(ctr, intstr.FromInt32(int32(port)))
		if !ok {
			c.problem(f, "%s: --%s %s: the container declares no port %d", w, flag, addr, port)
		} else if portName != "" && cp.Name != portName {
			c.problem(f, "%s: --%s %s: name port %d %q (Services, probes and scrapers find it by that name), not %q", w, flag, addr, port, portName, cp.Name)
		}
		return port, true
	}
	// probe checks a probe's presence, path and port.
	probe := func(kind string, pr *corev1.Probe, wantPath string, wantPort int) *corev1.Probe {
		if pr == nil {
			c.problem(f, "%s: no %s (httpGet %s)", w, kind, wantPath)
			return nil
		}
		if pr.HTTPGet == nil {
			c.problem(f, "%s: the %s is not an httpGet of %s", w, kind, wantPath)
			return nil
		}
		if pr.HTTPGet.Path != wantPath {
			c.problem(f, "%s: the %s asks %s; braid %s answers it at %s", w, kind, pr.HTTPGet.Path, a.command, wantPath)
		}
		cp, ok := portRef(ctr, pr.HTTPGet.Port)
		switch {
		case !ok:
			c.problem(f, "%s: the %s's port %s is not a port the container declares", w, kind, pr.HTTPGet.Port.String())
		case wantPort != 0 && int(cp.ContainerPort) != wantPort:
			c.problem(f, "%s: the %s's port %s is %d, but braid listens for it on %d", w, kind, pr.HTTPGet.Port.String(), cp.ContainerPort, wantPort)
		}
		return pr
	}
	switch a.command {
	case "serve":
		port, _ := listen("listen", "http")
		if sp := probe("startupProbe", ctr.StartupProbe, "/ready", port); sp != nil {
			period, fails := orDefault(sp.PeriodSeconds, 10), orDefault(sp.FailureThreshold, 3)
			if d := time.Duration(period*fails) * time.Second; d < minStartup {
				c.problem(f, "%s: the startupProbe allows %v (failureThreshold %d x periodSeconds %d) to load the model; a 100 GB model needs %v", w, d, fails, period, minStartup)
			}
		}
		probe("readinessProbe", ctr.ReadinessProbe, "/ready", port)
		probe("livenessProbe", ctr.LivenessProbe, "/health", port)
		c.checkGrace(p)
		c.mounted(p, "model", vols, false)
	case "worker":
		listen("listen", "braid")
		health, ok := listen("health-listen", "health")
		if !ok {
			health = 0
		}
		probe("livenessProbe", ctr.LivenessProbe, "/health", health)
		probe("readinessProbe", ctr.ReadinessProbe, "/ready", health)
		if a.set["data-listen"] {
			listen("data-listen", "")
		}
		c.mounted(p, "models-dir", vols, false)
	default:
		c.problem(f, "%s: runs braid %s; a deployment runs braid serve and braid worker", w, a.command)
	}
	if sf := c.mounted(p, "secret-file", vols, true); sf == "" {
		c.problem(f, "%s: no --secret-file: the ranks would accept loopback peers only", w)
	}
	c.checkResources(p)
	c.checkWritableCache(p)
}

func orDefault(v, def int32) int32 {
	if v == 0 {
		return def
	}
	return v
}

// checkGrace: the pod's terminationGracePeriodSeconds must cover the
// preStop hook and braid serve's --grace, or the kubelet kills the drain.
func (c *checker) checkGrace(p *pod) {
	grace, ok := duration(p.args.value("grace"))
	if !ok {
		c.problem(p.file, "%s: --grace %q is not a duration", p.where, p.args.value("grace"))
		return
	}
	var hook time.Duration
	if ls := p.braid.Lifecycle; ls != nil && ls.PreStop != nil {
		switch {
		case ls.PreStop.Sleep != nil:
			hook = time.Duration(ls.PreStop.Sleep.Seconds) * time.Second
		default:
			c.problem(p.file, "%s: a preStop hook other than sleep (the image has no shell to run one)", p.where)
		}
	}
	tgps := int64(30)
	if p.spec.TerminationGracePeriodSeconds != nil {
		tgps = *p.spec.TerminationGracePeriodSeconds
	}
	if time.Duration(tgps)*time.Second <= hook+grace {
		c.problem(p.file, "%s: terminationGracePeriodSeconds %d is not above the preStop sleep (%v) + --grace (%v): the kubelet would kill braid mid-drain", p.where, tgps, hook, grace)
	}
}

// mounted checks that the path a flag names is in a mounted volume and
// returns it; for the secret file, that the volume is a Secret and the file
// one of its keys.
func (c *checker) mounted(p *pod, flag string, vols map[string]*corev1.Volume, secret bool) string {
	val := p.args.value(flag)
	if val == "" || !strings.HasPrefix(val, "/") {
		return val
	}
	var best *corev1.VolumeMount
	for i, m := range p.braid.VolumeMounts {
		mp := strings.TrimSuffix(m.MountPath, "/")
		if (val == mp || strings.HasPrefix(val, mp+"/")) && (best == nil || len(mp) > len(best.MountPath)) {
			best = &p.braid.VolumeMounts[i]
		}
	}
	if best == nil {
		c.problem(p.file, "%s: --%s %s is in no mounted volume", p.where, flag, val)
		return val
	}
	v := vols[best.Name]
	if !secret || v == nil {
		return val
	}
	if v.Secret == nil {
		c.problem(p.file, "%s: --%s %s is in volume %s, which is not a Secret", p.where, flag, val, best.Name)
		return val
	}
	rel := strings.TrimPrefix(val, strings.TrimSuffix(best.MountPath, "/")+"/")
	key := rel
	if len(v.Secret.Items) > 0 {
		key = ""
		for _, it := range v.Secret.Items {
			if it.Path == rel {
				key = it.Key
			}
		}
		if key == "" {
			c.problem(p.file, "%s: --%s %s: Secret volume %s lists items without %s", p.where, flag, val, best.Name, rel)
			return val
		}
	}
	c.secretsUsed = append(c.secretsUsed, secretUse{p.file, p.where, v.Secret.SecretName, key})
	return val
}

// checkResources: memory requested (a node must have room for the shard)
// and, under a CPU limit, --threads within it (braid's default is every CPU
// of the node, not the limit).
func (c *checker) checkResources(p *pod) {
	r := p.braid.Resources
	if r.Requests.Memory().IsZero() {
		c.problem(p.file, "%s: no memory request: the scheduler would not look for a node with room for the model", p.where)
	}
	if r.Limits.Memory().IsZero() {
		c.problem(p.file, "%s: no memory limit (braid offers what its cgroup allows: set it from `braid plan`)", p.where)
	}
	cpu := r.Limits.Cpu()
	if cpu.IsZero() {
		return
	}
	t := p.args.value("threads")
	if !p.args.set["threads"] {
		c.problem(p.file, "%s: a CPU limit of %s without --threads: braid would start one thread per CPU of the node", p.where, cpu.String())
		return
	}
	n, err := strconv.ParseInt(t, 0, 64)
	if err == nil && n*1000 > cpu.MilliValue() {
		c.problem(p.file, "%s: --threads %s is more than the CPU limit %s", p.where, t, cpu.String())
	}
}

// checkWritableCache: braid writes its model hashes and streamed shards
// under $XDG_CACHE_HOME/braid; with a read-only root file system that must
// be a writable mount.
func (c *checker) checkWritableCache(p *pod) {
	sc := p.braid.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		return
	}
	dir := ""
	for _, e := range p.braid.Env {
		if e.Name == "XDG_CACHE_HOME" {
			dir = e.Value
		}
	}
	if dir == "" {
		c.problem(p.file, "%s: a read-only root file system and no XDG_CACHE_HOME: braid could not write its cache (model hashes, streamed shards)", p.where)
		return
	}
	for _, m := range p.braid.VolumeMounts {
		mp := strings.TrimSuffix(m.MountPath, "/")
		if (dir == mp || strings.HasPrefix(dir, mp+"/")) && !m.ReadOnly {
			return
		}
	}
	c.problem(p.file, "%s: XDG_CACHE_HOME %s is not in a writable mount, and the root file system is read-only", p.where, dir)
}

// crossChecks check what the files declare against each other.
func (c *checker) crossChecks() {
	for _, l := range c.lwsSets {
		c.checkLWS(l)
	}
	for _, p := range c.pods {
		if p.args != nil && p.args.command == "serve" && p.lws == nil {
			c.checkDiscovery(p)
		}
	}
	for _, s := range c.services {
		c.checkService(s)
	}
	for _, u := range c.secretsUsed {
		keys, ok := c.secretsMade[u.secret]
		switch {
		case !ok:
			c.problem(u.file, "%s: mounts Secret %s, which nothing in deploy/ makes (a secretGenerator, or the README's `kubectl create secret`)", u.where, u.secret)
		case !keys[u.key]:
			c.problem(u.file, "%s: reads key %s of Secret %s, which has %v", u.where, u.key, u.secret, keys)
		}
	}
	for dir, imgs := range c.images {
		for _, im := range imgs[1:] {
			if im != imgs[0] {
				c.problem(dir, "the braid containers run images %s and %s: every rank must run the same build (the handshake refuses another)", imgs[0], im)
			}
		}
	}
	for _, pm := range c.podMonitors {
		c.checkPodMonitor(pm)
	}
}

func (c *checker) checkLWS(l *lwsInfo) {
	where := "LeaderWorkerSet " + l.name
	if l.leader.args == nil || l.leader.args.command != "serve" {
		c.problem(l.file, "%s: the leader template does not run braid serve", where)
		return
	}
	if l.worker.args == nil || l.worker.args.command != "worker" {
		c.problem(l.file, "%s: the worker template does not run braid worker", where)
		return
	}
	if l.startup == "LeaderReady" {
		c.problem(l.file, "%s: startupPolicy LeaderReady starts the workers once the leader is Ready, and the leader is Ready only once every worker holds its shard: use LeaderCreated", where)
	}
	la := l.leader.args
	for _, fl := range []string{"workers", "cluster"} {
		if la.set[fl] {
			c.problem(l.file, "%s: the leader has --%s: under LeaderWorkerSet the ranks come from its environment", where, fl)
		}
	}
	if d := la.value("discover"); la.set["discover"] && d != "lws" {
		c.problem(l.file, "%s: the leader has --discover %s; under LeaderWorkerSet it is lws", where, d)
	}
	wp := la.value("worker-port")
	if wp == "" {
		wp = "7000"
	}
	if port, ok := portOfAddr(l.worker.args.value("listen")); ok && wp != strconv.Itoa(port) {
		c.problem(l.file, "%s: the workers listen on %d, the leader dials them on --worker-port %s", where, port, wp)
	}
}

// discoverName is the DNS name of --discover dns:NAME: a Service, with or
// without its namespace and cluster domain.
var discoverName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9-]+(\.svc(\.[a-z0-9.-]+)?)?)?$`)

// checkDiscovery checks a leader outside LeaderWorkerSet: it finds its
// workers through a headless Service of the same folder.
func (c *checker) checkDiscovery(p *pod) {
	a := p.args
	d := a.value("discover")
	if a.set["workers"] || a.set["cluster"] {
		return // named by hand
	}
	name, ok := strings.CutPrefix(d, "dns:")
	if a.unknown["discover"] {
		return // reported as unknown
	}
	if !ok {
		c.problem(p.file, "%s: braid serve outside LeaderWorkerSet with neither --workers nor --discover dns:NAME: it would serve alone", p.where)
		return
	}
	m := discoverName.FindStringSubmatch(name)
	if m == nil {
		c.problem(p.file, "%s: --discover dns:%s is not a Service's DNS name (SERVICE[.NAMESPACE.svc.cluster.local])", p.where, name)
		return
	}
	var svc *service
	for _, s := range c.services {
		if path.Dir(s.file) == p.dir && s.svc.Name == m[1] {
			svc = s
		}
	}
	if svc == nil {
		c.problem(p.file, "%s: --discover dns:%s: no Service %s in %s/", p.where, name, m[1], p.dir)
		return
	}
	s := svc.svc
	if s.Spec.ClusterIP != corev1.ClusterIPNone {
		c.problem(svc.file, "Service %s: discovery reads its pods' records: it must be headless (clusterIP: None)", s.Name)
	}
	if !s.Spec.PublishNotReadyAddresses {
		c.problem(svc.file, "Service %s: without publishNotReadyAddresses: true a worker is listed only once Ready, and the leader waits for all of them", s.Name)
	}
	var braidPort *corev1.ServicePort
	for i, sp := range s.Spec.Ports {
		if sp.Name == "braid" {
			braidPort = &s.Spec.Ports[i]
		}
	}
	if braidPort == nil {
		c.problem(svc.file, "Service %s: no port named braid: discovery reads the SRV records _braid._tcp.%s", s.Name, s.Name)
	}
	ranks := 1
	for _, w := range c.pods {
		if w.dir != p.dir || w == p || !selects(s.Spec.Selector, w.labels) {
			continue
		}
		if w.args == nil || w.args.command != "worker" {
			c.problem(svc.file, "Service %s selects %s, which does not run braid worker", s.Name, w.where)
			continue
		}
		if w.statefulSet == nil {
			c.problem(svc.file, "Service %s selects %s: the ranks come from StatefulSet ordinals, so the workers must be a StatefulSet", s.Name, w.where)
			continue
		}
		if w.statefulSet.Spec.ServiceName != s.Name {
			c.problem(w.file, "%s: serviceName %q, not %s: its pods would have no DNS names under the Service the leader reads", w.where, w.statefulSet.Spec.ServiceName, s.Name)
		}
		ranks += int(w.replicas)
		if braidPort != nil {
			cp, ok := portRef(w.braid, braidPort.TargetPort)
			if port, lok := portOfAddr(w.args.value("listen")); ok && lok && int(cp.ContainerPort) != port {
				c.problem(svc.file, "Service %s: port braid goes to %d, the workers listen on %d", s.Name, cp.ContainerPort, port)
			}
		}
	}
	if ranks == 1 {
		c.problem(svc.file, "Service %s selects no worker of %s/", s.Name, p.dir)
		return
	}
	if r := a.value("ranks"); !a.set["ranks"] || r != strconv.Itoa(ranks) {
		c.problem(p.file, "%s: --ranks %q, but the leader and the workers' replicas make %d ranks", p.where, r, ranks)
	}
}

// checkService: a Service selects pods of its own folder, and its ports
// reach ports they declare.
func (c *checker) checkService(s *service) {
	sv := s.svc
	where := "Service " + sv.Name
	if len(sv.Spec.Selector) == 0 {
		c.problem(s.file, "%s: no selector", where)
		return
	}
	var matched []*pod
	for _, p := range c.pods {
		if p.dir == path.Dir(s.file) && selects(sv.Spec.Selector, p.labels) {
			matched = append(matched, p)
		}
	}
	if len(matched) == 0 {
		c.problem(s.file, "%s: its selector %v matches no pod template in %s/", where, sv.Spec.Selector, path.Dir(s.file))
		return
	}
	for _, sp := range sv.Spec.Ports {
		target := sp.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(sp.Port)
		}
		for _, p := range matched {
			ctr := p.braid
			if ctr == nil && len(p.spec.Containers) > 0 {
				ctr = &p.spec.Containers[0]
			}
			if _, ok := portRef(ctr, target); !ok {
				c.problem(s.file, "%s: port %s goes to %s, which %s does not declare", where, sp.Name, target.String(), p.where)
			}
		}
	}
}

func (c *checker) checkPodMonitor(pm podMonitorAt) {
	sel, err := metav1.LabelSelectorAsSelector(&pm.pm.Spec.Selector)
	where := "PodMonitor " + pm.pm.Metadata.Name
	if err != nil {
		c.problem(pm.file, "%s: selector: %v", where, err)
		return
	}
	if sel.Empty() {
		c.problem(pm.file, "%s: an empty selector scrapes every pod", where)
		return
	}
	if len(pm.pm.Spec.PodMetricsEndpoints) == 0 {
		c.problem(pm.file, "%s: no podMetricsEndpoints", where)
	}
	leaders := 0
	for _, p := range c.pods {
		if p.args == nil || !strings.HasPrefix(p.dir, "kubernetes") {
			continue
		}
		match := sel.Matches(labels.Set(p.labels))
		switch {
		case p.args.command == "serve" && !match:
			c.problem(pm.file, "%s: does not select the leader %s (%s)", where, p.where, p.file)
		case p.args.command != "serve" && match:
			c.problem(pm.file, "%s: selects %s (%s), which serves no /metrics", where, p.where, p.file)
		case match:
			leaders++
			port, _ := portOfAddr(p.args.value("listen"))
			for _, ep := range pm.pm.Spec.PodMetricsEndpoints {
				cp, ok := portRef(p.braid, intstr.FromString(ep.Port))
				if !ok || int(cp.ContainerPort) != port {
					c.problem(pm.file, "%s: endpoint port %q is not the port braid serve listens on in %s", where, ep.Port, p.where)
				}
				if ep.Path != "" && ep.Path != "/metrics" {
					c.problem(pm.file, "%s: endpoint path %s; braid serves /metrics", where, ep.Path)
				}
			}
		}
	}
	if leaders == 0 {
		c.problem(pm.file, "%s: selects no leader", where)
	}
}
