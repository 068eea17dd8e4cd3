// embdump: llama.cpp's pooled embeddings of a few texts, for braid's
// encoder tests. Our own program against llama.h: each text (one per line
// of TEXTS) is tokenized with add_special (as llama-embedding does), run
// as its own sequence in one llama_decode with embeddings on, flash
// attention off, on the CPU with THREADS threads, and its pooled vector
// (the model's pooling_type) scaled to unit length (llama-embedding's
// default --embd-normalize 2). Writes OUT.json: the pooling type, the
// width, and per text its ids and vector.
#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

static void die(const char *msg) {
    fprintf(stderr, "embdump: %s\n", msg);
    exit(1);
}

static void quiet(ggml_log_level level, const char *text, void *) {
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 5) die("usage: embdump MODEL.gguf THREADS TEXTS.txt OUT.json");
    const int threads = atoi(argv[2]);
    if (threads < 1) die("bad thread count");
    std::vector<std::string> texts;
    {
        std::ifstream in(argv[3]);
        for (std::string line; std::getline(in, line);) texts.push_back(line);
    }
    if (texts.empty()) die("no texts");

    llama_log_set(quiet, nullptr);
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) die("model load failed");
    const llama_vocab *vocab = llama_model_get_vocab(model);

    std::vector<std::vector<llama_token>> ids;
    int total = 0;
    for (const auto &t : texts) {
        std::vector<llama_token> v(t.size() + 8);
        int n = llama_tokenize(vocab, t.data(), (int) t.size(), v.data(), (int) v.size(), true, false);
        if (n < 0) die("tokenize failed");
        v.resize(n);
        total += n;
        ids.push_back(v);
    }

    llama_context_params cp = llama_context_default_params();
    // One ubatch holds every token (a non-causal batch cannot be split);
    // llama.cpp's graph reserve wants the sizes of a whole context, not
    // of this batch.
    if (total > 512) die("more than 512 tokens in all");
    cp.n_ctx = cp.n_batch = cp.n_ubatch = 512;
    // As llama-embedding sets them (its graph reserve fails otherwise).
    cp.n_seq_max = llama_max_parallel_sequences();
    cp.kv_unified = true;
    if (texts.size() > cp.n_seq_max) die("too many texts");
    cp.n_threads = cp.n_threads_batch = threads;
    cp.embeddings = true;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) die("context creation failed");
    const int pooling = (int) llama_pooling_type(ctx);
    if (pooling == LLAMA_POOLING_TYPE_NONE) die("the model has no pooling");
    const int E = llama_model_n_embd(model);

    llama_batch b = llama_batch_init(total, 0, 1);
    for (size_t s = 0; s < ids.size(); s++) {
        for (size_t i = 0; i < ids[s].size(); i++) {
            int k = b.n_tokens++;
            b.token[k] = ids[s][i];
            b.pos[k] = (llama_pos) i;
            b.n_seq_id[k] = 1;
            b.seq_id[k][0] = (llama_seq_id) s;
            b.logits[k] = 1;
        }
    }
    if (llama_decode(ctx, b) != 0) die("decode failed");

    FILE *j = fopen(argv[4], "w");
    if (!j) die("cannot write the output");
    fprintf(j, "{\"pooling\": %d, \"n_embd\": %d, \"n_threads\": %d, \"flash_attn\": false, \"cases\": [\n", pooling, E, threads);
    for (size_t s = 0; s < ids.size(); s++) {
        const float *e = llama_get_embeddings_seq(ctx, (llama_seq_id) s);
        if (!e) die("no pooled embedding");
        double norm = 0;
        for (int k = 0; k < E; k++) norm += (double) e[k] * e[k];
        norm = std::sqrt(norm);
        fprintf(j, "{\"ids\": [");
        for (size_t i = 0; i < ids[s].size(); i++) fprintf(j, "%s%d", i ? ", " : "", ids[s][i]);
        fprintf(j, "], \"embedding\": [");
        for (int k = 0; k < E; k++) fprintf(j, "%s%.9g", k ? ", " : "", norm > 0 ? e[k] / norm : 0.0);
        fprintf(j, "]}%s\n", s + 1 < ids.size() ? "," : "");
    }
    fprintf(j, "]}\n");
    fclose(j);
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
