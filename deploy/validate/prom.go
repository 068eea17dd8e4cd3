package validate

import (
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// promConfig is the part of Prometheus's configuration file the snippet
// may use.
type promConfig struct {
	Global        map[string]any `json:"global,omitempty"`
	ScrapeConfigs []scrapeConfig `json:"scrape_configs"`
}

type scrapeConfig struct {
	JobName             string `json:"job_name"`
	MetricsPath         string `json:"metrics_path,omitempty"`
	Scheme              string `json:"scheme,omitempty"`
	ScrapeInterval      string `json:"scrape_interval,omitempty"`
	ScrapeTimeout       string `json:"scrape_timeout,omitempty"`
	KubernetesSDConfigs []struct {
		Role       string `json:"role"`
		Namespaces *struct {
			Names []string `json:"names,omitempty"`
		} `json:"namespaces,omitempty"`
	} `json:"kubernetes_sd_configs,omitempty"`
	StaticConfigs []struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	} `json:"static_configs,omitempty"`
	RelabelConfigs []relabelConfig `json:"relabel_configs,omitempty"`
}

type relabelConfig struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	Regex        *string  `json:"regex,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// promDuration is Prometheus's duration syntax.
var promDuration = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)

// prometheus checks the scrape configuration: strictly decoded, and run on
// the pods of the manifests to see that it scrapes exactly the leaders' API
// ports.
func (c *checker) prometheus() error {
	f, ok := c.file("prometheus/prometheus.yml")
	if !ok {
		return nil
	}
	var cfg promConfig
	if errs := decodeStrict(f.text, &cfg); len(errs) > 0 {
		for _, e := range errs {
			c.problem(f.name, "%v", e)
		}
		return nil
	}
	if len(cfg.ScrapeConfigs) == 0 {
		c.problem(f.name, "no scrape_configs")
	}
	jobs := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		where := "job " + sc.JobName
		if sc.JobName == "" {
			c.problem(f.name, "a scrape config without job_name")
		}
		if jobs[sc.JobName] {
			c.problem(f.name, "%s: job_name given twice", where)
		}
		jobs[sc.JobName] = true
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			c.problem(f.name, "%s: metrics_path %s; braid serves /metrics", where, sc.MetricsPath)
		}
		for _, d := range []string{sc.ScrapeInterval, sc.ScrapeTimeout} {
			if d != "" && !promDuration.MatchString(d) {
				c.problem(f.name, "%s: %q is not a Prometheus duration", where, d)
			}
		}
		rules, ok := c.compileRelabel(f.name, where, sc.RelabelConfigs)
		if !ok {
			continue
		}
		for _, sd := range sc.KubernetesSDConfigs {
			if sd.Role != "pod" {
				c.problem(f.name, "%s: kubernetes_sd_configs role %q: braid's leaders are found as pods (role: pod)", where, sd.Role)
				continue
			}
			c.simulatePodScrape(f.name, where, rules)
		}
		for _, st := range sc.StaticConfigs {
			for _, t := range st.Targets {
				_, p, err := net.SplitHostPort(t)
				port, perr := strconv.Atoi(p)
				switch {
				case err != nil || perr != nil:
					c.problem(f.name, "%s: target %q is not HOST:PORT", where, t)
				case len(c.serveListen) > 0 && !slices.Contains(c.serveListen, port):
					c.problem(f.name, "%s: target %s: braid-serve.service listens on %v", where, t, c.serveListen)
				}
			}
		}
	}
	return nil
}

type relabelRule struct {
	relabelConfig
	re *regexp.Regexp
}

// compileRelabel checks relabel rules as Prometheus reads them: regexes
// anchored at both ends, the actions it has.
func (c *checker) compileRelabel(file, where string, rs []relabelConfig) ([]relabelRule, bool) {
	var out []relabelRule
	ok := true
	for i, r := range rs {
		expr := "(.*)"
		if r.Regex != nil {
			expr = *r.Regex
		}
		re, err := regexp.Compile("^(?:" + expr + ")$")
		if err != nil {
			c.problem(file, "%s: relabel rule %d: regex %q: %v", where, i+1, expr, err)
			ok = false
			continue
		}
		switch r.Action {
		case "", "replace":
			if r.TargetLabel == "" {
				c.problem(file, "%s: relabel rule %d: replace without target_label", where, i+1)
			}
		case "keep", "drop":
			if len(r.SourceLabels) == 0 {
				c.problem(file, "%s: relabel rule %d: %s without source_labels", where, i+1, r.Action)
			}
		default:
			c.problem(file, "%s: relabel rule %d: action %q is not one deploy/validate runs (replace, keep, drop)", where, i+1, r.Action)
			ok = false
		}
		out = append(out, relabelRule{r, re})
	}
	return out, ok
}

// podTargetLabels are the labels Prometheus's pod discovery gives a pod's
// container port (the ones the rules may read).
func podTargetLabels(p *pod, portName string, port int32) map[string]string {
	l := map[string]string{
		"__meta_kubernetes_namespace":                   "default",
		"__meta_kubernetes_pod_name":                    "pod",
		"__meta_kubernetes_pod_container_name":          p.braid.Name,
		"__meta_kubernetes_pod_container_port_name":     portName,
		"__meta_kubernetes_pod_container_port_number":   strconv.Itoa(int(port)),
		"__meta_kubernetes_pod_container_port_protocol": "TCP",
		"__address__":      "10.0.0.1:" + strconv.Itoa(int(port)),
		"__metrics_path__": "/metrics",
	}
	for k, v := range p.labels {
		n := promName(k)
		l["__meta_kubernetes_pod_label_"+n] = v
		l["__meta_kubernetes_pod_labelpresent_"+n] = "true"
	}
	return l
}

var promInvalid = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// promName is a Kubernetes label name as a Prometheus label name.
func promName(s string) string { return promInvalid.ReplaceAllString(s, "_") }

// relabel runs the rules on a target's labels; false when dropped.
func relabel(rules []relabelRule, l map[string]string) bool {
	for _, r := range rules {
		sep := ";"
		if r.Separator != nil {
			sep = *r.Separator
		}
		var vals []string
		for _, s := range r.SourceLabels {
			vals = append(vals, l[s])
		}
		v := strings.Join(vals, sep)
		switch r.Action {
		case "keep":
			if !r.re.MatchString(v) {
				return false
			}
		case "drop":
			if r.re.MatchString(v) {
				return false
			}
		case "", "replace":
			m := r.re.FindStringSubmatchIndex(v)
			if m == nil {
				continue
			}
			repl := "$1"
			if r.Replacement != nil {
				repl = *r.Replacement
			}
			l[r.TargetLabel] = string(r.re.ExpandString(nil, repl, v, m))
		}
	}
	return true
}

// simulatePodScrape runs the rules on every container port of every braid
// pod of the manifests: what they keep must be each leader's API port, and
// nothing else.
func (c *checker) simulatePodScrape(file, where string, rules []relabelRule) {
	var missed, extra []string
	for _, p := range c.pods {
		if p.braid == nil || !strings.HasPrefix(p.dir, "kubernetes") {
			continue
		}
		api, _ := portOfAddr(p.args.value("listen"))
		for _, cp := range p.braid.Ports {
			want := p.args.command == "serve" && int(cp.ContainerPort) == api
			got := relabel(rules, podTargetLabels(p, cp.Name, cp.ContainerPort))
			id := p.file + " " + p.where + " port " + cp.Name
			switch {
			case want && !got:
				missed = append(missed, id)
			case got && !want:
				extra = append(extra, id)
			}
		}
	}
	sort.Strings(missed)
	sort.Strings(extra)
	for _, m := range missed {
		c.problem(file, "%s: does not scrape the leader's API: %s", where, m)
	}
	for _, e := range extra {
		c.problem(file, "%s: scrapes %s, which serves no /metrics", where, e)
	}
}
