// refdump: llama.cpp's logits for a token sequence, for braid's reference
// files. Decodes the whole prompt in ONE llama_decode call with logits
// requested at every position, then G greedy steps (own argmax, lowest id
// wins ties) one token at a time through the cache.
//
// usage: refdump MODEL.gguf OUT_PREFIX THREADS f16|f32 G STRIDE TOK,TOK,...
// writes OUT_PREFIX.logits.f32 (the rows of positions p with (p+1) % STRIDE
// == 0, each V floats), OUT_PREFIX.greedy_logits.f32 (G x V),
// OUT_PREFIX.json (tokens, greedy ids, margins, settings).
#include "ggml-backend.h"
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

static void die(const char *msg) {
    fprintf(stderr, "refdump: %s\n", msg);
    exit(1);
}

// With REFDUMP_TENSORS=name,name,... every graph tensor of those names
// (ggml's names, such as indexer_score-0) that is float32 is appended to
// OUT_PREFIX.<name>.f32 each time it is computed (one llama_decode after
// another), for finding where braid and llama.cpp part.
static std::string g_out;
static std::vector<std::string> g_names;

static bool dump_cb(struct ggml_tensor *t, bool ask, void *) {
    bool want = false;
    for (const auto &n : g_names) want = want || n == ggml_get_name(t);
    if (ask || !want) return want;
    if (t->type != GGML_TYPE_F32 || !ggml_is_contiguous(t)) return true;
    std::vector<float> v(ggml_nelements(t));
    ggml_backend_tensor_get(t, v.data(), 0, v.size() * sizeof(float));
    FILE *f = fopen((g_out + "." + ggml_get_name(t) + ".f32").c_str(), "ab");
    if (f) {
        fwrite(v.data(), sizeof(float), v.size(), f);
        fclose(f);
    }
    fprintf(stderr, "refdump: %s ne [%lld %lld %lld %lld]\n", ggml_get_name(t), (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3]);
    return true;
}

static void write_f32(const std::string &path, const std::vector<float> &v) {
    FILE *f = fopen(path.c_str(), "wb");
    if (!f) die(("cannot create " + path).c_str());
    if (fwrite(v.data(), sizeof(float), v.size(), f) != v.size()) die("short write");
    fclose(f);
}

// quiet passes warnings and errors on; with REFDUMP_VERBOSE set, everything
// (which fused ops the context resolved, for example).
static void quiet(enum ggml_log_level level, const char *text, void *) {
    if (level >= GGML_LOG_LEVEL_WARN || getenv("REFDUMP_VERBOSE")) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 8) die("usage: refdump MODEL.gguf OUT_PREFIX THREADS f16|f32 GREEDY STRIDE TOK,TOK,...");
    const char *model_path = argv[1];
    std::string out = argv[2];
    int threads = atoi(argv[3]);
    bool kvf32 = strcmp(argv[4], "f32") == 0;
    if (!kvf32 && strcmp(argv[4], "f16") != 0) die("kv type must be f16 or f32");
    int greedy = atoi(argv[5]);
    int stride = atoi(argv[6]);
    std::vector<llama_token> toks;
    for (char *s = argv[7]; *s;) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s) die("bad token list");
        toks.push_back((llama_token) v);
        s = *end == ',' ? end + 1 : end;
    }
    if (toks.empty() || threads < 1 || greedy < 0 || stride < 1) die("bad arguments");

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) die("model load failed");
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.type_k = cp.type_v = kvf32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    if (const char *names = getenv("REFDUMP_TENSORS")) {
        g_out = out;
        for (std::string s = names; !s.empty();) {
            size_t c = s.find(',');
            g_names.push_back(s.substr(0, c));
            s = c == std::string::npos ? "" : s.substr(c + 1);
        }
        cp.cb_eval = dump_cb;
    }
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("context creation failed");
    const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
    const int P = (int) toks.size();

    llama_batch b = llama_batch_init(P, 0, 1);
    b.n_tokens = P;
    for (int i = 0; i < P; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    if (llama_decode(ctx, b) != 0) die("prompt decode failed");
    std::vector<float> logits;
    std::vector<int> rows;
    for (int i = 0; i < P; i++) {
        if ((i + 1) % stride != 0) continue;
        const float *r = llama_get_logits_ith(ctx, i);
        logits.insert(logits.end(), r, r + V);
        rows.push_back(i);
    }
    write_f32(out + ".logits.f32", logits);

    std::vector<float> gl((size_t) greedy * V);
    std::vector<int> ids;
    std::vector<float> margins;
    const float *row = llama_get_logits_ith(ctx, P - 1);
    for (int g = 0; g < greedy; g++) {
        memcpy(&gl[(size_t) g * V], row, V * sizeof(float));
        int a = 0;
        for (int i = 1; i < V; i++) if (row[i] > row[a]) a = i;
        float second = -1e30f;
        for (int i = 0; i < V; i++) if (i != a && row[i] > second) second = row[i];
        ids.push_back(a);
        margins.push_back(row[a] - second);
        if (g == greedy - 1) break;
        llama_batch s = llama_batch_init(1, 0, 1);
        s.n_tokens = 1;
        s.token[0] = a;
        s.pos[0] = P + g;
        s.n_seq_id[0] = 1;
        s.seq_id[0][0] = 0;
        s.logits[0] = 1;
        if (llama_decode(ctx, s) != 0) die("greedy decode failed");
        llama_batch_free(s);
        row = llama_get_logits_ith(ctx, 0);
    }
    write_f32(out + ".greedy_logits.f32", gl);

    FILE *j = fopen((out + ".json").c_str(), "w");
    if (!j) die("cannot create json");
    fprintf(j, "{\"tokens\":[");
    for (int i = 0; i < P; i++) fprintf(j, "%s%d", i ? "," : "", toks[i]);
    fprintf(j, "],\"n_vocab\":%d,\"rows\":[", V);
    for (size_t i = 0; i < rows.size(); i++) fprintf(j, "%s%d", i ? "," : "", rows[i]);
    fprintf(j, "],\"greedy\":[");
    for (size_t i = 0; i < ids.size(); i++) fprintf(j, "%s%d", i ? "," : "", ids[i]);
    fprintf(j, "],\"greedy_margins\":[");
    for (size_t i = 0; i < margins.size(); i++) fprintf(j, "%s%.9g", i ? "," : "", margins[i]);
    fprintf(j, "],\"kv_cache_type\":\"%s\",\"flash_attn\":false,\"n_threads\":%d}\n", kvf32 ? "f32" : "f16", threads);
    fclose(j);

    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
