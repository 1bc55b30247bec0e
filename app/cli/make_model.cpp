// `kvscope-cli make-model -o PATH`: write a random-weight model of a chosen
// architecture, shape and weight type, for benchmarks and parity checks.
#include <fmt/format.h>

#include "cli/commands.h"
#include "gguf/tensor_type.h"
#include "model/architecture.h"
#include "model/synthetic_model.h"

namespace kvscope::cli {
namespace {

// llama.cpp's Q4_K_M mix (the rule its quantizer applies, read as a fact):
// Q4_K, with Q6_K for the output matrix (the token embedding where tied)
// and for attn_v and ffn_down (the experts' too) in the layers given more
// bits: the first and last eighth, and every third layer between.
void applyQ4KM(model::SyntheticModelSpec& spec) {
  spec.weightType = gguf::TensorType::kQ4_K;
  const auto n = static_cast<int>(spec.nLayer);
  for (int l = 0; l < n; ++l) {
    if (l < n / 8 || l >= 7 * n / 8 || (l - n / 8) % 3 == 2) {
      spec.tensorTypes[fmt::format("blk.{}.attn_v.weight", l)] = gguf::TensorType::kQ6_K;
      spec.tensorTypes[fmt::format("blk.{}.ffn_down.weight", l)] = gguf::TensorType::kQ6_K;
      spec.tensorTypes[fmt::format("blk.{}.ffn_down_exps.weight", l)] = gguf::TensorType::kQ6_K;
    }
  }
  spec.tensorTypes[spec.tiedEmbeddings ? "token_embd.weight" : "output.weight"] =
      gguf::TensorType::kQ6_K;
  spec.quantFallback = true;  // rows not of whole super-blocks: Q5_0 / Q8_0
}

}  // namespace

void registerMakeModel(CLI::App& app, const GlobalOptions&, int& exitCode) {
  static model::SyntheticModelSpec spec;
  static std::string out, type = "F32", expertType, mix;
  auto* cmd = app.add_subcommand("make-model", "Write a random-weight model (GGUF) for benchmarks and tests");
  cmd->add_option("-o,--output", out, "Output .gguf path")->required();
  cmd->add_option("--arch", spec.architecture, "An architecture kvscope runs: " + model::supportedArchitectureList())
      ->default_val(spec.architecture);
  cmd->add_option("--layers", spec.nLayer, "Blocks")->default_val(spec.nLayer);
  cmd->add_option("--dim", spec.nEmbd, "Model width")->default_val(spec.nEmbd);
  cmd->add_option("--ffn", spec.nFf, "Feed-forward width")->default_val(spec.nFf);
  cmd->add_option("--heads", spec.nHead, "Query heads")->default_val(spec.nHead);
  cmd->add_option("--kv-heads", spec.nHeadKv, "Key/value heads")->default_val(spec.nHeadKv);
  cmd->add_option("--head-dim", spec.headDim, "Per-head width")->default_val(spec.headDim);
  cmd->add_option("--layer-heads", spec.layerHeads,
                  "Query heads per layer, comma-separated (Gemma 4's form; default: --heads)")
      ->delimiter(',');
  cmd->add_option("--layer-kv-heads", spec.layerHeadsKv,
                  "Key/value heads per layer, comma-separated (default: --kv-heads)")
      ->delimiter(',');
  cmd->add_option("--head-dim-window", spec.headDimWindow,
                  "Per-head width of the window layers (0: --head-dim)")
      ->default_val(spec.headDimWindow);
  cmd->add_option("--rope-dims-window", spec.ropeDimsWindow,
                  "Rotated dimensions per head of the window layers (0: --rope-dims)")
      ->default_val(spec.ropeDimsWindow);
  cmd->add_option("--layer-ffn", spec.layerFf,
                  "Feed-forward width per layer, comma-separated (default: --ffn)")
      ->delimiter(',');
  cmd->add_option("--kv-shared-layers", spec.nKvShared,
                  "gemma4: the last N layers attend an earlier layer's K/V rows")
      ->default_val(spec.nKvShared);
  cmd->add_option("--per-layer-dim", spec.nEmbdPerLayer,
                  "gemma4: width of each layer's per-layer input (0: none)")
      ->default_val(spec.nEmbdPerLayer);
  cmd->add_flag("--global-v-from-k", spec.globalValueIsKey,
                "gemma4: the global layers take V from the K projection (no attn_v)");
  cmd->add_option("--logit-softcap", spec.finalLogitSoftcap,
                  "gemma4: soft-cap of the final logits (0: none)")
      ->default_val(spec.finalLogitSoftcap);
  cmd->add_option("--vocab", spec.nVocab, "Vocabulary size (>= 259)")->default_val(spec.nVocab);
  cmd->add_option("--ctx", spec.contextLength, "Trained context length")->default_val(spec.contextLength);
  cmd->add_option("--type", type, "Weight type: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K …")->default_val(type);
  cmd->add_option(
      "--expert-type", expertType,
      "Type of the stacked expert tensors (default: --type), e.g. MXFP4 as gpt-oss ships");
  cmd->add_option("--mix", mix,
                  "A llama.cpp quantization mix in place of --type: Q4_K_M (Q4_K, Q6_K for the "
                  "output, and attn_v and ffn_down of some layers; Q5_0 / Q8_0 for rows not "
                  "of whole 256-value blocks)")
      ->check(CLI::IsMember({"Q4_K_M"}));
  cmd->add_option("--seed", spec.seed, "Weight seed")->default_val(spec.seed);
  cmd->add_option("--rope-theta", spec.ropeTheta, "RoPE base frequency")->default_val(spec.ropeTheta);
  cmd->add_option("--rope-dims", spec.ropeDims, "Rotated dimensions per head (0: all)")
      ->default_val(spec.ropeDims);
  cmd->add_option("--experts", spec.nExpert,
                  "Experts per layer (an architecture with experts: qwen3moe, gpt-oss, gemma4)")
      ->default_val(spec.nExpert);
  cmd->add_option("--experts-used", spec.nExpertUsed, "Experts a token uses")
      ->default_val(spec.nExpertUsed);
  cmd->add_option("--expert-ffn", spec.nFfExp, "Each expert's feed-forward width")
      ->default_val(spec.nFfExp);
  cmd->add_option("--rope-linear", spec.ropeLinearFactor,
                  "Linear RoPE scaling factor of the global layers (> 1 scales)")
      ->default_val(spec.ropeLinearFactor);
  cmd->add_option("--rope-yarn", spec.ropeYarnFactor,
                  "YaRN RoPE scaling factor (> 1 scales; the original context is ctx / factor)")
      ->default_val(spec.ropeYarnFactor);
  cmd->add_option("--window", spec.slidingWindow,
                  "Sliding window of the window layers, in positions (0: none)")
      ->default_val(spec.slidingWindow);
  cmd->add_option("--window-period", spec.windowPeriod,
                  "Every Nth layer attends globally, the others the window (0: none)")
      ->default_val(spec.windowPeriod);
  cmd->add_option("--rope-theta-window", spec.ropeThetaWindow, "RoPE base of the window layers")
      ->default_val(spec.ropeThetaWindow);
  cmd->add_flag("--tied", spec.tiedEmbeddings, "The output shares the token embedding");
  cmd->add_flag("--rope-factors", spec.ropeFreqFactors,
                "Ship RoPE factor tensors (llama: rope_freqs; phi3: LongRoPE long and short)");
  cmd->callback([&exitCode] {
    auto t = gguf::typeByName(type);
    if (!t) {
      fmt::print(stderr, "error: unknown weight type '{}'\n", type);
      exitCode = 1;
      return;
    }
    spec.weightType = *t;
    if (mix == "Q4_K_M") {
      applyQ4KM(spec);
      type = mix;
    }
    if (!expertType.empty()) {
      const auto et = gguf::typeByName(expertType);
      if (!et) {
        fmt::print(stderr, "error: unknown expert weight type '{}'\n", expertType);
        exitCode = 1;
        return;
      }
      for (uint32_t l = 0; l < spec.nLayer; ++l) {
        for (const char* stack :
             {"ffn_gate_exps", "ffn_up_exps", "ffn_gate_up_exps", "ffn_down_exps"})
          spec.tensorTypes[fmt::format("blk.{}.{}.weight", l, stack)] = *et;
      }
      type += " + " + expertType + " experts";
    }
    if (auto s = model::writeSyntheticModel(spec, out); !s.ok()) {
      fmt::print(stderr, "error: {}\n", s.error().message);
      exitCode = 1;
      return;
    }
    const uint64_t q = uint64_t{spec.nHead} * spec.headDim, kv = uint64_t{spec.nHeadKv} * spec.headDim;
    const uint64_t ffn = spec.nExpert > 0
                             ? uint64_t{spec.nEmbd} * spec.nExpert * (1 + 3ull * spec.nFfExp)
                             : 3ull * spec.nEmbd * spec.nFf;
    const uint64_t perLayer = spec.nEmbd * (2 * q + 2 * kv) + ffn;
    const uint64_t params = perLayer * spec.nLayer + uint64_t{spec.nEmbd} * spec.nVocab * (spec.tiedEmbeddings ? 1 : 2);
    fmt::print("wrote {} ({} {}, {:.1f}M parameters)\n", out, spec.architecture, type, static_cast<double>(params) / 1e6);
  });
}

}  // namespace kvscope::cli
