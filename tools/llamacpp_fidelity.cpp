// llama.cpp's side of tools/fidelity-vs-llamacpp.sh (built by the script
// against a llama.cpp tree outside this repository; not part of kvscope's
// build). Teacher-forces a text through llama.cpp's C API twice, with an f16
// KV cache and with the K/V cache types asked for, the same way
// `kvscope-cli eval` does (the text tokenized with BOS as the vocabulary
// asks, PREFILL tokens as one batch, then one token per step; a step's
// logits predict the next token), and prints one JSON object: the per-step
// KL(P_f16 || P_test) summarised as kvscope's eval does (mean, median, p99,
// p99.9: linear interpolation between order statistics), top-1 agreement,
// the cache types' bits per value and the f16 run's perplexity of the forced
// tokens (the same text through both engines' f16 caches should score alike:
// a check that they run the model the same, RoPE scaling included).
//   llamacpp_fidelity MODEL.gguf TEXT_FILE PREFILL TYPE_K TYPE_V THREADS
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ggml.h"
#include "llama.h"

namespace {

ggml_type typeByName(const std::string& name) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name(static_cast<ggml_type>(t));
    if (n && name == n) return static_cast<ggml_type>(t);
  }
  std::fprintf(stderr, "unknown cache type %s\n", name.c_str());
  std::exit(2);
}

// One run's log-softmax rows, one per forced step.
std::vector<std::vector<double>> forced(llama_model* model, const std::vector<llama_token>& tokens,
                                        int prefill, ggml_type k, ggml_type v, int threads) {
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(tokens.size() + 8);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(std::max(prefill, 1));
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = threads;
  cp.type_k = k;
  cp.type_v = v;
  // Quantized V needs flash attention in llama.cpp; f16 runs the same path.
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) {
    std::fprintf(stderr, "cannot make a context for K %s, V %s\n", ggml_type_name(k),
                 ggml_type_name(v));
    std::exit(1);
  }
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::vector<std::vector<double>> rows;
  const auto take = [&](const float* logits) {
    double top = -INFINITY, sum = 0.0;
    for (int i = 0; i < vocab; ++i) top = std::max(top, double{logits[i]});
    for (int i = 0; i < vocab; ++i) sum += std::exp(double{logits[i]} - top);
    std::vector<double> row(vocab);
    for (int i = 0; i < vocab; ++i) row[i] = double{logits[i]} - top - std::log(sum);
    rows.push_back(std::move(row));
  };
  llama_batch b = llama_batch_init(prefill, 0, 1);
  for (int i = 0; i < prefill; ++i) {
    b.token[i] = tokens[i];
    b.pos[i] = i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = i == prefill - 1;
  }
  b.n_tokens = prefill;
  if (llama_decode(ctx, b) != 0) std::exit(1);
  take(llama_get_logits_ith(ctx, prefill - 1));
  llama_batch_free(b);
  for (size_t i = static_cast<size_t>(prefill); i + 1 < tokens.size(); ++i) {
    llama_batch one = llama_batch_init(1, 0, 1);
    one.token[0] = tokens[i];
    one.pos[0] = static_cast<llama_pos>(i);
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = 0;
    one.logits[0] = 1;
    one.n_tokens = 1;
    if (llama_decode(ctx, one) != 0) std::exit(1);
    take(llama_get_logits_ith(ctx, 0));
    llama_batch_free(one);
  }
  llama_free(ctx);
  return rows;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

double bitsPerValue(ggml_type t) {
  return 8.0 * static_cast<double>(ggml_type_size(t)) / static_cast<double>(ggml_blck_size(t));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: llamacpp_fidelity MODEL TEXT PREFILL TYPE_K TYPE_V THREADS\n");
    return 2;
  }
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const int prefill = std::atoi(argv[3]);
  const ggml_type k = typeByName(argv[4]), v = typeByName(argv[5]);
  const int threads = std::atoi(argv[6]);
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  // A file's final newline ends the file, not the text (as kvscope-cli eval and
  // llama.cpp's own -f read it), so both engines force the same tokens.
  std::string s = text.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  std::vector<llama_token> tokens(s.size() + 8);
  const int n = llama_tokenize(vocab, s.data(), static_cast<int32_t>(s.size()), tokens.data(),
                               static_cast<int32_t>(tokens.size()), true, false);
  if (n < prefill + 2) {
    std::fprintf(stderr, "%d tokens: fewer than prefill + 2\n", n);
    return 1;
  }
  tokens.resize(static_cast<size_t>(n));
  const auto p = forced(model, tokens, prefill, GGML_TYPE_F16, GGML_TYPE_F16, threads);
  const auto q = forced(model, tokens, prefill, k, v, threads);
  std::vector<double> kld;
  double agree = 0.0, nll = 0.0;
  for (size_t s2 = 0; s2 < p.size(); ++s2) {
    nll -= p[s2][static_cast<size_t>(tokens[static_cast<size_t>(prefill) + s2])];
    double kl = 0.0;
    for (size_t i = 0; i < p[s2].size(); ++i) kl += std::exp(p[s2][i]) * (p[s2][i] - q[s2][i]);
    kld.push_back(std::max(kl, 0.0));
    const auto top = [](const std::vector<double>& r) {
      return std::max_element(r.begin(), r.end()) - r.begin();
    };
    agree += top(p[s2]) == top(q[s2]) ? 1.0 : 0.0;
  }
  double mean = 0.0;
  for (double x : kld) mean += x / static_cast<double>(kld.size());
  std::printf(
      "{\"tokens\": %d, \"steps\": %zu, \"type_k\": \"%s\", \"type_v\": \"%s\", "
      "\"bits_per_value\": %.4f, \"kld_mean\": %.6e, \"kld_median\": %.6e, \"kld_p99\": %.6e, "
      "\"kld_p999\": %.6e, \"top1\": %.6f, \"ppl_f16\": %.6f}\n",
      n, kld.size(), ggml_type_name(k), ggml_type_name(v), (bitsPerValue(k) + bitsPerValue(v)) / 2,
      mean, quantile(kld, 0.5), quantile(kld, 0.99), quantile(kld, 0.999),
      agree / static_cast<double>(kld.size()), std::exp(nll / static_cast<double>(kld.size())));
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
