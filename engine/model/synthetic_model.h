#pragma once
// Writes random-weight GGUF models of any supported architecture, weight type
// and shape: the inputs of backend parity tests and benchmarks (a real model
// of every shape and quantization cannot ship with the project).
// Weights are seeded and scaled like a trained model's (about 1/sqrt(fan_in)),
// so activations stay in a realistic range through many layers; each value is
// a function of (seed, tensor, index), so every core fills the file and the
// bytes do not depend on the thread count. The vocabulary
// is SentencePiece-style: <unk>, <s>, </s>, the 256 byte tokens, then
// printable pieces, so any text tokenizes through byte fallback.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/tensor_type.h"

namespace kvscope::model {

struct SyntheticModelSpec {
  // Any supported architecture: its description's tensor table decides the
  // tensors (qwen2's q/k/v biases, qwen3's q/k norms, phi3's fused ones).
  std::string architecture = "llama";
  uint32_t nLayer = 2;
  uint32_t nEmbd = 256;
  uint32_t nFf = 512;
  uint32_t nHead = 4;
  uint32_t nHeadKv = 1;
  uint32_t headDim = 64;
  // Per-layer shapes (as Gemma 4's files state them), empty or [nLayer]:
  // query and KV heads per layer; and the window layers' head width (0:
  // headDim).
  std::vector<uint32_t> layerHeads, layerHeadsKv;
  uint32_t headDimWindow = 0;
  uint32_t ropeDimsWindow = 0;  // the window layers' rotated dimensions; 0: ropeDims
  // Gemma 4's: feed-forward widths per layer (empty: nFf), KV-shared last
  // layers, per-layer input width, global layers taking V from K, and a
  // final logit soft-cap (0: none).
  std::vector<uint32_t> layerFf;
  uint32_t nKvShared = 0;
  uint32_t nEmbdPerLayer = 0;
  bool globalValueIsKey = false;
  float finalLogitSoftcap = 0.0f;
  uint32_t nVocab = 512;  // >= 259 (specials + bytes)
  uint32_t contextLength = 2048;
  float ropeTheta = 10000.0f;
  uint32_t ropeDims = 0;          // rotated dimensions per head; 0: headDim
  float ropeLinearFactor = 1.0f;  // > 1: linear RoPE scaling by this factor
  // > 1: YaRN scaling by this factor from an original context of
  // contextLength / factor (gpt-oss: 32, 4096 of 131072).
  float ropeYarnFactor = 1.0f;
  // Ship the architecture's RoPE factor tensors: llama's rope_freqs (3.1-style
  // factors), phi3's LongRoPE long and short factors (the file then trains on
  // twice its original context).
  bool ropeFreqFactors = false;
  bool tiedEmbeddings = false;
  // Mixture of experts (architectures whose table has expert tensors):
  // experts, experts a token uses, and each expert's feed-forward width.
  uint32_t nExpert = 0;
  uint32_t nExpertUsed = 0;
  uint32_t nFfExp = 0;
  // Sliding-window attention: window positions (0: none), and the period of
  // global layers (every windowPeriod-th layer; 0: none global) and the
  // window layers' RoPE base.
  uint32_t slidingWindow = 0;
  uint32_t windowPeriod = 0;
  float ropeThetaWindow = 10000.0f;
  gguf::TensorType weightType = gguf::TensorType::kF32;  // 2-D projection weights; norms stay F32
  // Types for single 2-D tensors by name ("blk.0.attn_q.weight"), over
  // weightType. A type gguf/quantize.h cannot produce (IQ2_XXS, TQ1_0, …) gets
  // seeded random block bytes: a file as a user could hand the app.
  std::map<std::string, gguf::TensorType> tensorTypes;
  // Rows that are not whole blocks of their type take llama.cpp's quantizer's
  // fall-back type (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS ->
  // IQ4_NL, Q2_K/Q3_K -> Q4_0; F16 where that is not whole either), as its
  // K-quant mixes do for widths like Gemma 4's 2112; otherwise such a type is
  // an error.
  bool quantFallback = false;
  uint32_t seed = 1;
};

Expected<std::vector<uint8_t>> syntheticModelBytes(const SyntheticModelSpec& spec);
Status writeSyntheticModel(const SyntheticModelSpec& spec, const std::filesystem::path& path);

}  // namespace kvscope::model
