package main

import (
	"io"
	"strings"
	"testing"
)

// FuzzLlamaEnv feeds one environment variable of any name and value to
// serve's LLAMA_ARG_* reader and --host splitting: an error or a value,
// never a panic, and a refusal always names the variable.
func FuzzLlamaEnv(f *testing.F) {
	for _, s := range []string{"LLAMA_ARG_N_PREDICT=4", "LLAMA_ARG_ENDPOINT_SLOTS=off", "LLAMA_ARG_HOST=127.0.0.1,::1",
		"LLAMA_ARG_FLASH_ATTN=on", "LLAMA_ARG_RPC=h:1", "LLAMA_ARG_X=", "LLAMA_API_KEY=a,,b", "LLAMA_ARG_TEMPERATURE=nan",
		"LLAMA_ARG_CONTEXT_SHIFT=enabled", "LLAMA_ARG_PORT=99999", "PATH=/bin"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, kv string) {
		fs := newFlags("serve", "", io.Discard)
		var mf modelFlags
		mf.register(fs)
		listen := fs.String("listen", "127.0.0.1:8080", "")
		hp := hostPortFlags(fs)
		fs.Int("parallel", 8, "")
		fs.String("alias", "", "")
		fs.String("api-key-file", "", "")
		var sf specFlags
		sf.register(fs, false)
		var lf llamaFlags
		lf.register(fs)
		if _, err := parseInterspersed(fs, nil); err != nil {
			t.Fatal(err)
		}
		err := lf.applyEnv(fs, []string{kv})
		k, _, _ := strings.Cut(kv, "=")
		if err != nil && !strings.Contains(err.Error(), k) {
			t.Fatalf("%q: the error does not name the variable: %v", kv, err)
		}
		if err == nil {
			lf.defaults()
			lf.template()
			listenAddrs(fs, hp, *listen)
		}
	})
}
