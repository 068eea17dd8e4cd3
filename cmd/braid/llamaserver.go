package main

// llama-server's command line on braid serve: its sampling flags as the
// defaults of requests, its endpoint switches, its chat-template and key
// flags, several --host addresses, its LLAMA_ARG_* environment variables
// (the command line wins), and every other flag of its that braid does not
// implement either refused with why or, where it changes nothing that a
// client can see, accepted with a logged note. docs/LLAMA-SERVER.md is
// the table of all of them.

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"braid/internal/chat"
	"braid/internal/sample"
	"braid/internal/server"
)

// llamaFlags are serve's llama-server flags.
type llamaFlags struct {
	temp, topP, minP, repeatPen, presencePen, freqPen float64
	topK, repeatLastN, nPredict, keep                 int
	seed                                              *seedValue

	metrics, slots, ui, ctxShift, jinja bool
	chatTemplate, chatTemplateFile      string
	apiKey, tags                        string

	// notes are the harmless flags given, logged once the log is open.
	notes []string
	// mapped are llama-server flags that set one of braid's (--mlock:
	// --load-mode mlock), applied after parsing.
	mapped map[string]string
}

// boolPair is one of the two flags of a switch (--slots / --no-slots):
// both write the same bool, the later one on the command line wins.
type boolPair struct {
	v   *bool
	neg bool
}

func (b boolPair) String() string {
	if b.v == nil {
		return "false"
	}
	return strconv.FormatBool(*b.v != b.neg)
}

func (b boolPair) Set(s string) error {
	on, err := parseTruthy(s)
	if err != nil {
		return err
	}
	*b.v = on != b.neg
	return nil
}

func (b boolPair) IsBoolFlag() bool { return true }

// parseTruthy reads a switch's value as llama.cpp's environment does (1,
// true, on, enabled / 0, false, off, disabled) and Go's flags do.
func parseTruthy(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "on", "enabled", "yes", "t":
		return true, nil
	case "0", "false", "off", "disabled", "no", "f":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a switch value: give true or false (1/0, on/off, enabled/disabled)", s)
}

// switchFlag registers name and no-name (and the further names) as one
// switch with default def.
func switchFlag(fs *flag.FlagSet, v *bool, def bool, on, off []string, usage string) {
	*v = def
	for _, n := range on {
		fs.Var(boolPair{v: v}, n, usage)
	}
	for _, n := range off {
		fs.Var(boolPair{v: v, neg: true}, n, "turn off: "+usage)
	}
}

func (f *llamaFlags) register(fs *flag.FlagSet) {
	d := sample.DefaultParams()
	fs.Float64Var(&f.temp, "temp", float32Default(d.Temperature), "default temperature of requests that do not set one (0: greedy)")
	fs.IntVar(&f.topK, "top-k", d.TopK, "default top_k of requests (0: off)")
	fs.Float64Var(&f.topP, "top-p", float32Default(d.TopP), "default top_p of requests (1: off)")
	fs.Float64Var(&f.minP, "min-p", float32Default(d.MinP), "default min_p of requests (0: off)")
	fs.Float64Var(&f.repeatPen, "repeat-penalty", float32Default(d.RepeatPenalty), "default repeat_penalty of requests (1: off)")
	fs.IntVar(&f.repeatLastN, "repeat-last-n", d.RepeatLastN, "tokens the penalties look back over (-1: all, 0: off)")
	fs.Float64Var(&f.presencePen, "presence-penalty", 0, "default presence_penalty of requests")
	fs.Float64Var(&f.freqPen, "frequency-penalty", 0, "default frequency_penalty of requests")
	fs.IntVar(&f.nPredict, "n-predict", -1, "default token limit of requests that set none (-1: the context, or none with --context-shift)")
	fs.IntVar(&f.keep, "keep", 0, "prompt tokens a context shift keeps after the beginning-of-sequence token (-1: the whole prompt)")
	f.seed = &seedValue{}
	fs.Var(f.seed, "seed", "default `seed` of requests that set none: every such request samples with it; -1 or unset: a random one per request")
	switchFlag(fs, &f.metrics, true, []string{"metrics"}, []string{"no-metrics"}, "serve /metrics (on by default, unlike llama-server's)")
	switchFlag(fs, &f.slots, true, []string{"slots"}, []string{"no-slots"}, "serve /slots")
	switchFlag(fs, &f.ui, true, []string{"ui", "webui"}, []string{"no-ui", "no-webui"}, "serve the web page at /")
	switchFlag(fs, &f.ctxShift, false, []string{"context-shift"}, []string{"no-context-shift"},
		"when a generation fills the context, drop the older half of what follows --keep and go on (the rest is evaluated again)")
	switchFlag(fs, &f.jinja, true, []string{"jinja"}, []string{"no-jinja"}, "render chat with the Jinja template (braid always does; --no-jinja is noted)")
	fs.StringVar(&f.chatTemplate, "chat-template", "", "chat template instead of the model's: its Jinja `text`, or chatml")
	fs.StringVar(&f.chatTemplateFile, "chat-template-file", "", "chat template `file` (Jinja) instead of the model's")
	fs.StringVar(&f.apiKey, "api-key", "", "accepted API `keys`, comma-separated (beside --api-key-file)")
	fs.StringVar(&f.tags, "tags", "", "model `tags`, comma-separated, shown in /models")
	fs.Var(alsoFlag{fs, "n-predict"}, "predict", "the same as --n-predict")
	fs.Var(alsoFlag{fs, "temp"}, "temperature", "the same as --temp")
	f.mapped = map[string]string{}
	for _, l := range llamaOnly {
		l := l
		fs.Var(llamaOnlyFlag{f: f, l: l}, l.names[0], l.usage())
		for _, n := range l.names[1:] {
			fs.Var(llamaOnlyFlag{f: f, l: l, name: n}, n, l.usage())
		}
	}
}

// alsoFlag is another name for a flag registered before (help lists it on
// its own line, saying so).
type alsoFlag struct {
	fs   *flag.FlagSet
	name string
}

func (a alsoFlag) String() string {
	if a.fs == nil {
		return ""
	}
	if f := a.fs.Lookup(a.name); f != nil {
		return f.Value.String()
	}
	return ""
}
func (a alsoFlag) Set(s string) error { return a.fs.Set(a.name, s) }

// llamaOnly is a flag of llama-server's that braid serve does not
// implement: refused with why (and what to use), or, where it changes
// nothing a client can see, accepted and noted in the log; or mapped onto
// one of braid's flags.
type llamaOption struct {
	names []string
	value bool   // takes a value
	note  string // accepted: logged so
	why   string // refused: the reason, and what to do instead
	mapTo string // accepted: sets braid's flag "name=value"
	env   string // its LLAMA_ARG_* variable, if any
}

func (l llamaOption) usage() string {
	switch {
	case l.mapTo != "":
		return "llama-server's; here --" + strings.Replace(l.mapTo, "=", " ", 1)
	case l.note != "":
		return "llama-server's; accepted, no effect: " + l.note
	}
	return "llama-server's; refused: " + l.why
}

var llamaOnly = []llamaOption{
	{names: []string{"cont-batching", "cb"}, note: "braid always batches continuously", env: "LLAMA_ARG_CONT_BATCHING"},
	{names: []string{"flash-attn", "fa"}, value: true, note: "braid's attention kernels are its own (no flash-attention switch)", env: "LLAMA_ARG_FLASH_ATTN"},
	{names: []string{"n-gpu-layers", "ngl", "gpu-layers"}, value: true, note: "braid runs on CPUs; nothing is offloaded", env: "LLAMA_ARG_N_GPU_LAYERS"},
	{names: []string{"main-gpu", "mg"}, value: true, note: "braid runs on CPUs", env: "LLAMA_ARG_MAIN_GPU"},
	{names: []string{"threads-http"}, value: true, note: "Go's HTTP server has no thread pool to size", env: "LLAMA_ARG_THREADS_HTTP"},
	{names: []string{"ubatch-size", "ub"}, value: true, note: "braid has no physical batch apart from -b", env: "LLAMA_ARG_UBATCH"},
	{names: []string{"warmup"}, note: "braid always runs a warm-up step"},
	{names: []string{"no-warmup"}, note: "braid always runs one warm-up step before /ready (it checks every rank)"},
	{names: []string{"no-perf"}, note: "braid's timings cost nothing to keep", env: "LLAMA_ARG_PERF"},
	{names: []string{"log-disable"}, note: "braid's log is its stderr; redirect it"},
	{names: []string{"verbose", "v", "log-verbose"}, note: "braid logs at one level"},
	{names: []string{"log-verbosity", "lv"}, value: true, note: "braid logs at one level", env: "LLAMA_ARG_LOG_VERBOSITY"},
	{names: []string{"log-colors"}, value: true, note: "braid's log has no colours", env: "LLAMA_ARG_LOG_COLORS"},
	{names: []string{"log-timestamps"}, note: "braid's log lines always carry the time", env: "LLAMA_ARG_LOG_TIMESTAMPS"},
	{names: []string{"log-prefix"}, note: "braid's log lines always carry a prefix", env: "LLAMA_ARG_LOG_PREFIX"},
	{names: []string{"timeout", "to"}, value: true, note: "braid bounds reading headers (30 s) and every cluster wait itself; a generation runs until its client leaves", env: "LLAMA_ARG_TIMEOUT"},
	{names: []string{"prio"}, value: true, note: "braid leaves the process priority to the system (nice, systemd)"},
	{names: []string{"mlock"}, mapTo: "load-mode=mlock"},
	{names: []string{"no-mmap"}, mapTo: "load-mode=read"},
	{names: []string{"model-url", "mu"}, value: true, why: "give a local file or -m ORG/NAME:QUANT with --pull", env: "LLAMA_ARG_MODEL_URL"},
	{names: []string{"hf-repo", "hf", "hfr"}, value: true, why: "give -m ORG/NAME[:QUANT] (with --pull to download)", env: "LLAMA_ARG_HF_REPO"},
	{names: []string{"hf-file", "hff"}, value: true, why: "give -m ORG/NAME:FILE", env: "LLAMA_ARG_HF_FILE"},
	{names: []string{"lora"}, value: true, why: "LoRA adapters are not supported"},
	{names: []string{"lora-scaled"}, value: true, why: "LoRA adapters are not supported"},
	{names: []string{"mmproj"}, value: true, why: "multimodal projectors are not supported", env: "LLAMA_ARG_MMPROJ"},
	{names: []string{"embedding", "embeddings"}, why: "braid serves embeddings beside generation on one node (no embeddings-only mode); --no-embeddings turns them off", env: "LLAMA_ARG_EMBEDDINGS"},
	{names: []string{"rerank", "reranking"}, why: "no /rerank endpoint", env: "LLAMA_ARG_RERANKING"},
	{names: []string{"props"}, why: "POST /props (changing settings at run time) is not supported", env: "LLAMA_ARG_ENDPOINT_PROPS"},
	{names: []string{"slot-save-path"}, value: true, why: "saving slots to files is not supported"},
	{names: []string{"split-mode", "sm"}, value: true, why: "braid splits over nodes: --workers ... --split tensor|layer", env: "LLAMA_ARG_SPLIT_MODE"},
	{names: []string{"rpc"}, value: true, why: "braid runs the model on its own workers: braid worker on each node, then --workers HOST:PORT,...", env: "LLAMA_ARG_RPC"},
	{names: []string{"draft-max", "draft", "draft-n"}, value: true, why: "use --spec draft|ngram|mtp --spec-n-max N", env: "LLAMA_ARG_DRAFT_MAX"},
	{names: []string{"draft-min", "draft-n-min"}, value: true, why: "use --spec-n-min N", env: "LLAMA_ARG_DRAFT_MIN"},
	{names: []string{"cache-type-k", "ctk"}, value: true, why: "the KV cache is float16, or float32 with --kv-f32", env: "LLAMA_ARG_CACHE_TYPE_K"},
	{names: []string{"cache-type-v", "ctv"}, value: true, why: "the KV cache is float16, or float32 with --kv-f32", env: "LLAMA_ARG_CACHE_TYPE_V"},
	{names: []string{"cache-reuse"}, value: true, why: "reuse of chunks by KV shifting is not supported (whole-prefix reuse is automatic; --no-prefix-cache turns it off)", env: "LLAMA_ARG_CACHE_REUSE"},
	{names: []string{"rope-scaling"}, value: true, why: "RoPE scaling comes from the model's metadata", env: "LLAMA_ARG_ROPE_SCALING_TYPE"},
	{names: []string{"rope-scale"}, value: true, why: "RoPE scaling comes from the model's metadata", env: "LLAMA_ARG_ROPE_SCALE"},
	{names: []string{"rope-freq-base"}, value: true, why: "RoPE comes from the model's metadata", env: "LLAMA_ARG_ROPE_FREQ_BASE"},
	{names: []string{"rope-freq-scale"}, value: true, why: "RoPE comes from the model's metadata", env: "LLAMA_ARG_ROPE_FREQ_SCALE"},
	{names: []string{"grp-attn-n", "gan"}, value: true, why: "self-extend is not supported", env: "LLAMA_ARG_GRP_ATTN_N"},
	{names: []string{"grp-attn-w", "gaw"}, value: true, why: "self-extend is not supported", env: "LLAMA_ARG_GRP_ATTN_W"},
	{names: []string{"api-prefix"}, value: true, why: "endpoints are served at the root only", env: "LLAMA_ARG_API_PREFIX"},
	{names: []string{"path"}, value: true, why: "the web page is built in; --no-ui turns it off", env: "LLAMA_ARG_STATIC_PATH"},
	{names: []string{"reasoning-format"}, value: true, why: "set reasoning_format per request (none, auto)", env: "LLAMA_ARG_THINK"},
	{names: []string{"reasoning-budget"}, value: true, why: "a thinking budget is not supported", env: "LLAMA_ARG_THINK_BUDGET"},
	{names: []string{"numa"}, value: true, why: "NUMA placement is not managed; use --cpus LIST to pin", env: "LLAMA_ARG_NUMA"},
	{names: []string{"no-cont-batching", "nocb"}, why: "braid always batches continuously"},
	{names: []string{"n-cpu-moe", "ncmoe"}, value: true, why: "braid runs on CPUs; nothing to keep there", env: "LLAMA_ARG_N_CPU_MOE"},
	{names: []string{"override-tensor", "ot"}, value: true, why: "tensor placement overrides are not supported", env: "LLAMA_ARG_OVERRIDE_TENSOR"},
}

// llamaOnlyFlag is one name of a llamaOnly option on the command line.
type llamaOnlyFlag struct {
	f    *llamaFlags
	l    llamaOption
	name string // "" for names[0]
}

func (o llamaOnlyFlag) String() string { return "" }

func (o llamaOnlyFlag) IsBoolFlag() bool { return !o.l.value }

func (o llamaOnlyFlag) Set(v string) error {
	return o.f.use(o.l, o.flagName(), v, "")
}

func (o llamaOnlyFlag) flagName() string {
	n := o.name
	if n == "" {
		n = o.l.names[0]
	}
	if len(n) <= 3 && !strings.Contains(n, "-") && n != "rpc" {
		return "-" + n
	}
	return "--" + n
}

// use takes a llamaOnly option given as name (or by the environment
// variable env): a note, a mapping, or the refusal.
func (f *llamaFlags) use(l llamaOption, name, v, env string) error {
	from := name
	if env != "" {
		from = env + " (" + name + ")"
	}
	switch {
	case l.mapTo != "":
		k, val, _ := strings.Cut(l.mapTo, "=")
		f.mapped[k] = val
		f.notes = append(f.notes, fmt.Sprintf("%s: llama-server's, taken as --%s %s", from, k, val))
		return nil
	case l.note != "":
		shown := from
		if l.value {
			shown += " " + v
		}
		f.notes = append(f.notes, fmt.Sprintf("%s: llama-server's, accepted and has no effect: %s", shown, l.note))
		return nil
	}
	return fmt.Errorf("%s is llama-server's and braid serve does not implement it: %s (see docs/LLAMA-SERVER.md)", from, l.why)
}

// llamaEnv maps llama-server's environment variables to serve's flags.
var llamaEnv = map[string]string{
	"LLAMA_ARG_MODEL": "m", "LLAMA_ARG_CTX_SIZE": "c", "LLAMA_ARG_N_PARALLEL": "parallel", "LLAMA_ARG_HOST": "host",
	"LLAMA_ARG_PORT": "port", "LLAMA_ARG_N_PREDICT": "n-predict", "LLAMA_ARG_THREADS": "t", "LLAMA_ARG_BATCH": "b",
	"LLAMA_ARG_ALIAS": "alias", "LLAMA_ARG_TAGS": "tags", "LLAMA_ARG_API_KEY_FILE": "api-key-file", "LLAMA_API_KEY": "api-key",
	"LLAMA_ARG_ENDPOINT_METRICS": "metrics", "LLAMA_ARG_ENDPOINT_SLOTS": "slots", "LLAMA_ARG_UI": "ui",
	"LLAMA_ARG_CONTEXT_SHIFT": "context-shift", "LLAMA_ARG_JINJA": "jinja", "LLAMA_ARG_CHAT_TEMPLATE": "chat-template",
	"LLAMA_ARG_CHAT_TEMPLATE_FILE": "chat-template-file", "LLAMA_ARG_TEMPERATURE": "temp", "LLAMA_ARG_TOP_K": "top-k",
	"LLAMA_ARG_TOP_P": "top-p", "LLAMA_ARG_MIN_P": "min-p", "LLAMA_ARG_REPEAT_PENALTY": "repeat-penalty",
	"LLAMA_ARG_PRESENCE_PENALTY": "presence-penalty", "LLAMA_ARG_FREQUENCY_PENALTY": "frequency-penalty",
	"LLAMA_ARG_SSL_KEY_FILE": "ssl-key-file", "LLAMA_ARG_SSL_CERT_FILE": "ssl-cert-file",
	"LLAMA_ARG_SPEC_DRAFT_MODEL": "model-draft", "LLAMA_ARG_SPEC_DRAFT_N_MAX": "spec-n-max", "LLAMA_ARG_SPEC_DRAFT_N_MIN": "spec-n-min",
}

// switches lists, per switch flag, the names of both its sides: a switch
// given on the command line under either keeps its variable out.
var switches = map[string][]string{
	"metrics": {"metrics", "no-metrics"}, "slots": {"slots", "no-slots"}, "ui": {"ui", "webui", "no-ui", "no-webui"},
	"context-shift": {"context-shift", "no-context-shift"}, "jinja": {"jinja", "no-jinja"},
}

// applyEnv sets, from llama-server's environment variables, the flags the
// command line did not give (its long and short names both count). A
// variable of a flag braid refuses is refused; one braid does not know at
// all is refused too, rather than ignored.
func (f *llamaFlags) applyEnv(fs *flag.FlagSet, environ []string) error {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	alias := aliasOf[fs]
	isGiven := func(name string) bool {
		names := []string{name}
		if s, ok := switches[name]; ok {
			names = s
		}
		for _, n := range names {
			if given[n] {
				return true
			}
			for a, p := range alias {
				if (p == n && given[a]) || (a == n && given[p]) {
					return true
				}
			}
		}
		return false
	}
	byEnv := map[string]llamaOption{}
	for _, l := range llamaOnly {
		if l.env != "" {
			byEnv[l.env] = l
		}
	}
	slices.Sort(environ)
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "LLAMA_ARG_") && k != "LLAMA_API_KEY" {
			continue
		}
		if name, ok := llamaEnv[k]; ok {
			if isGiven(name) || fs.Lookup(name) == nil {
				continue
			}
			if err := fs.Set(name, v); err != nil {
				return usagef("%s=%q (--%s): %v", k, v, name, err)
			}
			continue
		}
		if l, ok := byEnv[k]; ok {
			if isGiven(l.names[0]) {
				continue
			}
			if err := f.use(l, "--"+l.names[0], v, k); err != nil {
				return usageError{err}
			}
			continue
		}
		return usagef("%s is set, but braid serve reads no such llama-server variable; unset it (see docs/LLAMA-SERVER.md)", k)
	}
	return nil
}

// defaults are the requests' defaults the flags give, checked.
func (f *llamaFlags) defaults() (*server.Defaults, error) {
	p := sample.Params{Temperature: float32(f.temp), TopK: f.topK, TopP: float32(f.topP), MinP: float32(f.minP),
		RepeatPenalty: float32(f.repeatPen), RepeatLastN: f.repeatLastN, PresencePenalty: float32(f.presencePen), FrequencyPenalty: float32(f.freqPen)}
	if err := p.Validate(); err != nil {
		// The sampler names the wire field (top_p); say the flag.
		msg := strings.TrimPrefix(err.Error(), "sample: invalid ")
		name, rest, _ := strings.Cut(msg, " ")
		return nil, usagef("--%s %s", strings.ReplaceAll(name, "_", "-"), rest)
	}
	if f.nPredict < -1 {
		return nil, usagef("--n-predict %d: give a number of tokens, or -1 for no limit", f.nPredict)
	}
	if f.keep < -1 {
		return nil, usagef("--keep %d: give a number of tokens, or -1 for the whole prompt", f.keep)
	}
	d := &server.Defaults{Params: p, NPredict: f.nPredict, NKeep: f.keep}
	if f.seed.set {
		d.SeedSet, d.Params.Seed = true, f.seed.seed
	}
	return d, nil
}

// template is the chat template --chat-template or --chat-template-file
// give, or nil for the model's.
func (f *llamaFlags) template() (*chat.Template, error) {
	switch {
	case f.chatTemplate != "" && f.chatTemplateFile != "":
		return nil, usagef("give --chat-template or --chat-template-file, not both")
	case f.chatTemplateFile != "":
		data, err := os.ReadFile(f.chatTemplateFile)
		if err != nil {
			return nil, fmt.Errorf("--chat-template-file: %w", err)
		}
		t, err := chat.Parse(f.chatTemplateFile, string(data))
		if err != nil {
			return nil, fmt.Errorf("--chat-template-file %s: %w", f.chatTemplateFile, err)
		}
		return t, nil
	case f.chatTemplate == "":
		return nil, nil
	case f.chatTemplate == "chatml":
		return chat.ChatML(), nil
	case !strings.Contains(f.chatTemplate, "{{") && !strings.Contains(f.chatTemplate, "{%"):
		// llama-server's built-in names (llama3, mistral-v7, ...).
		return nil, usagef("--chat-template %q: braid's only built-in template is chatml; give the template's Jinja text, or --chat-template-file FILE", f.chatTemplate)
	}
	t, err := chat.Parse("--chat-template", f.chatTemplate)
	if err != nil {
		return nil, fmt.Errorf("--chat-template: %w", err)
	}
	return t, nil
}

// splitList is a comma-separated flag value, trimmed, without empty
// entries.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// listenAddrs are the addresses to listen on: --listen, or --host (one
// or several, comma-separated, IPv4 and IPv6 alike) with --port.
func listenAddrs(fs *flag.FlagSet, hp hostPort, listen string) ([]string, error) {
	hosts := splitList(*hp.host)
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["host"] && len(hosts) == 0 {
		return nil, usagef("--host %q: give at least one address", *hp.host)
	}
	if len(hosts) <= 1 {
		a, err := hp.addr(fs, listen)
		if err != nil {
			return nil, err
		}
		return []string{a}, nil
	}
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, usagef("--listen %q: %v", listen, err)
	}
	if given["listen"] {
		return nil, usagef("give --listen HOST:PORT or --host/--port, not both")
	}
	if given["port"] {
		if *hp.port < 0 || *hp.port > 65535 {
			return nil, usagef("--port %d: a port is from 0 to 65535 (0 picks a free one)", *hp.port)
		}
		port = strconv.Itoa(*hp.port)
	}
	var out []string
	for _, h := range hosts {
		if strings.HasSuffix(h, ".sock") {
			return nil, usagef("--host %q: UNIX sockets are not served; give IP addresses", h)
		}
		out = append(out, net.JoinHostPort(strings.Trim(h, "[]"), port))
	}
	return out, nil
}

// listenAll listens on every address; on an error it closes those opened.
func listenAll(addrs []string) (net.Listener, error) {
	var lns []net.Listener
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("listening on %s: %w", a, err)
		}
		lns = append(lns, ln)
	}
	if len(lns) == 1 {
		return lns[0], nil
	}
	return newMultiListener(lns), nil
}

// multiListener is several listeners as one: a goroutine per listener
// accepts and hands its connections over; Close closes them all, which
// ends those goroutines.
type multiListener struct {
	lns   []net.Listener
	conns chan net.Conn
	errs  chan error
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func newMultiListener(lns []net.Listener) *multiListener {
	m := &multiListener{lns: lns, conns: make(chan net.Conn), errs: make(chan error, len(lns)), done: make(chan struct{})}
	for _, ln := range lns {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for {
				c, err := ln.Accept()
				if err != nil {
					var ne net.Error
					if errors.As(err, &ne) && ne.Timeout() {
						continue
					}
					select {
					case m.errs <- err:
					case <-m.done:
					}
					return
				}
				select {
				case m.conns <- c:
				case <-m.done:
					c.Close()
					return
				}
			}
		}()
	}
	return m
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case c := <-m.conns:
		return c, nil
	case err := <-m.errs:
		return nil, err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

func (m *multiListener) Close() error {
	var err error
	m.once.Do(func() {
		close(m.done)
		for _, ln := range m.lns {
			if e := ln.Close(); e != nil && err == nil {
				err = e
			}
		}
		m.wg.Wait()
	})
	return err
}

// Addr is the first listener's address.
func (m *multiListener) Addr() net.Addr { return m.lns[0].Addr() }

// addrs are every listener's address.
func listenerAddrs(ln net.Listener, scheme string) []string {
	if m, ok := ln.(*multiListener); ok {
		var out []string
		for _, l := range m.lns {
			out = append(out, scheme+"://"+l.Addr().String())
		}
		return out
	}
	return []string{scheme + "://" + ln.Addr().String()}
}
