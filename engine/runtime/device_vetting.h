#pragma once
// Vetting a Vulkan device before anyone chats on it. kvscope's Vulkan kernels
// were shaped on Mesa's lavapipe; a GPU whose driver runs one of them
// differently would produce fluent-looking garbage. So before a model runs on
// a device, a small random-weight model built from that model's own spec
// (VetSpec: its architecture, the weight type of every projection, head_dim,
// query heads per KV head, RoPE, and the KV schemes and indexer its policy
// uses) runs a prefill and six decode steps on the device and on the CPU
// backend, three of them with dense attention and three indexed (with sparse
// V, on the policy's page size: the app turns the indexer on mid-chat without
// re-encoding), and their logits are compared. Every weight type, every (K, V)
// scheme pair (under `auto`, every scheme as K and as V) and the attention
// mode the model will use run at least once; not every pipeline variant does
// (prefill tile sizes follow the batch, a Hugging Face llama folder's NeoX
// RoPE is vetted as GGUF llama's).
//
// The verdict is remembered per (device, driver, kernel build, spec) in a
// small JSON file (by default $XDG_CACHE_HOME/kvscope/device-checks.json), so
// a model is vetted once per driver and later starts pay a device listing and
// a file read. A device that opens but fails to run the model fails the check.
//
// Pass: on every step the largest logit difference is within 2e-2 of the CPU
// row's spread, the mean within 1e-3, and the argmax agrees on all but at most
// one step. A non-finite logit fails. lavapipe measures ~1e-4 and ~1e-5
// (`kvscope-cli devices --vet`); a miscompiled kernel gives differences of the
// order of the spread itself (tests/runtime/device_vetting_test.cpp breaks one).

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "gguf/tensor_type.h"
#include "kv/indexer.h"
#include "kv/kv_cache.h"
#include "kv/kv_policy.h"
#include "model/model_file.h"
#include "model/synthetic_model.h"

namespace kvscope::runtime {

// The shape of what a model runs, reduced to what decides the kernels.
struct VetSpec {
  std::string architecture;  // a supported architecture (its extra tensors)
  uint32_t headDim = 0;
  uint32_t gqa = 1;               // query heads per KV head
  uint32_t ropeDims = 0;          // rotated dimensions per head
  float ropeLinearFactor = 1.0f;  // > 1: linear RoPE scaling
  bool ropeFreqFactors = false;   // per-frequency factors (rope_freqs.weight)
  bool tiedEmbeddings = false;
  // Sliding-window layers: the small model alternates a window layer (a window
  // shorter than its prefill) with a global one. headDim, gqa and ropeDims
  // are the global layers'; where the window layers differ (Gemma 4), theirs
  // (else 0).
  bool window = false;
  uint32_t windowHeadDim = 0, windowGqa = 0, windowRopeDims = 0;
  // Per tensor ("token_embd.weight", "output.weight", and per layer without
  // its "blk.N." prefix, e.g. "attn_v.weight"): every type the model stores
  // it in, sorted. A Q4_K_M file lists Q4_K and Q6_K for attn_v.
  std::map<std::string, std::vector<gguf::TensorType>> weightTypes;
  // The (K, V) schemes of the synthetic layers: every pair the policy gives
  // a layer; for `auto`, each candidate as K and as V (anyPair: a layer may
  // pair any K scheme here with any V scheme here).
  std::vector<kv::LayerSchemes> layers;
  bool anyPair = false;
  // The policy keeps a precision tail (its own kernel passes): the small model
  // runs one of a few rows.
  bool tail = false;
  kv::IndexerOptions attention;  // the policy's indexer; its page size picks the kernels

  // One canonical line: part of the verdict's key.
  std::string text() const;
  // Whether a vetting run of this spec ran every kernel `other` needs: the
  // same model shape and attention, and each of its (K, V) pairs (under
  // anyPair, its K and its V schemes).
  bool covers(const VetSpec& other) const;
  // For people: "a llama model with Q4_K, Q6_K weights, head_dim 128, 4 query
  // heads per KV head and a q8_0/turbo4 cache".
  std::string describe() const;
};

// The spec of `model` run under `policy`. Errors: a policy that does not
// resolve for the model (the same error makeBackend reports).
Expected<VetSpec> vetSpecFor(const model::ModelFile& model, const kv::KvPolicy& policy);
// The small random-weight model a vetting of `spec` runs. Errors: no model of
// that shape can be built (attn_output's types need other widths).
Expected<model::SyntheticModelSpec> vetModelSpec(const VetSpec& spec);

struct DeviceVerdict {
  std::string device;  // the device's name
  std::string key;     // what identifies the device, driver, kernels and spec
  std::string model;   // VetSpec::describe() of what was vetted
  bool passed = false;
  bool remembered = false;  // read from the verdict file, not measured now
  std::string failure;      // why the device could not run the model (then !passed)
  double worstRel = 0.0;    // max |logit diff| / spread over the steps
  double meanRel = 0.0;     // mean |logit diff| / spread
  uint32_t steps = 0, argmaxAgree = 0;
  uint32_t selectingSteps = 0;  // decode steps whose device indexer left rows out
  // What was found: "<device> matches (or differs from) the CPU backend on
  // <model>: <measures>", or "<device> failed to run <model> (<why>)".
  std::string finding() const;
  // One line for the user: finding(), and when it failed, that the CPU
  // backend is used instead.
  std::string summary() const;
};

// The verdict file in the user's cache folder; empty when there is none (the
// check then runs every time and nothing is written).
std::filesystem::path defaultVerdictFile();

// Vets Vulkan device `device` (-1: the one chooseDevice picks) on a synthetic
// model of `spec`. Returns the remembered verdict when the file holds one for
// the same key; otherwise measures, then records it (dropping verdicts of
// other kernel builds). Errors: no Vulkan device, a spec no synthetic model
// can be built from, or the device failing to run at all (the caller then
// reports that error as it would without vetting).
Expected<DeviceVerdict> vetDevice(int device, const std::filesystem::path& verdictFile,
                                  const VetSpec& spec);

}  // namespace kvscope::runtime
