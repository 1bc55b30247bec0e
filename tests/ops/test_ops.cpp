// test_ops: every op of the description vocabulary (model/forward_ops.h),
// Vulkan against the CPU backend, at many shapes, weight types and KV
// schemes: what a new kernel or a new GPU is checked with (KVSCOPE_DEVICE
// picks the device; llama.cpp's test-backend-ops is the model).
//
// Each case is a one-op description run through Backend::forwardWith on both
// backends over the same random-weight model, its output named "out" and read
// back through the dump (Backend::setDumpTarget). The op's inputs are made
// bit-identical on both sides: rows of weight matrices fetched by embed(),
// which both backends do on the host, so a difference is the op's alone. The
// CPU backend runs with exact (float32) products. Errors are normalized mean
// squared: NMSE = sum (vulkan - cpu)^2 / sum cpu^2, over every value of every
// step. The bounds, per op (u = 2^-24, float32's unit roundoff):
//  - embed and logit rows: the same host code or a copy on both: exactly 0.
//  - rmsnorm added to a residual, or without a weight: the rmsnorm bound.
//  - scale and add: one rounded multiply or add per value on both: exactly 0.
//  - soft-cap: tanh from another library, which near 0 loses a few more bits
//    (lavapipe's: 3e-13 at cap 30, where x / cap is small); bound 1e-11.
//  - gated product: the matmul epilogue's GELU/SiLU arithmetic: bound 1e-10.
//  - rope: the same angle table, one multiply-add per value; only FMA
//    contraction differs: NMSE ~ u^2 ~ 4e-15; bound 1e-12.
//  - rmsnorm: a sum of n squares in another order (relative error <= n u,
//    ~sqrt(n) u typically): NMSE <= n u^2 ~ 1e-11 at n = 4096; bound 1e-10.
//  - matmul: each output a sum of `cols` products in another order (blocks of
//    a quantized row decode to the same floats on both): NMSE ~ cols u^2,
//    bound 1e-9 at cols <= 1024 with margin for the SwiGLU epilogue's exp.
//  - moe: the same picks (scores a few ulp apart do not reorder random
//    routers' experts), then three such products and a weighted sum: the
//    matmul bound (Gemma 4's too: its router reads another norm of x, its
//    experts are one fused gate/up stack, and each has an output scale).
//  - attention: the same codes (the encoders are byte-exact, tests/gpu/
//    kv_codec_test.cpp), scores and sums in other orders, the CPU's
//    polynomial exp (relative 2e-7) and f16 rounding of the query and weights
//    where both sides are f16: a score error of ~1e-6 moves a weight by as
//    much relatively, so NMSE ~ 1e-12..1e-10; bound 1e-8. A rotated scheme
//    adds a float Hadamard round trip (NMSE ~ d u^2). Layers of their own
//    heads and widths (Gemma 4), and a KV-shared layer's read of another
//    layer's rows (attendCache), take the same bound.
// Breaking one kernel fails the cases of its op and names them (see the
// closing note of the commit that added this file).
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "backend/cpu_backend.h"
#include "backend/vulkan_backend.h"
#include "kv/kv_scheme.h"
#include "support/synthetic_model_file.h"

namespace kvscope::test {
namespace {

using model::Act;
using model::ForwardOps;
using model::ForwardPlan;
using model::OpName;

struct OpCase {
  std::string name;  // "matmul Q4_K 256->96 bias"
  model::SyntheticModelSpec spec;
  kv::LayerSchemes kv;               // the cache both backends encode
  uint32_t prefill = 5, decode = 0;  // tokens per step: one prefill batch, then single tokens
  double bound = 0.0;                // largest NMSE accepted
  std::function<Status(const ForwardPlan&, ForwardOps&)> op;  // writes the tensor "out"
};

struct Measured {
  double nmse = 0.0;
  bool ran = false;
};

// Runs the case's steps on one backend; the "out" rows of each step, in order.
Expected<std::vector<float>> runOn(backend::Backend& b, const OpCase& c) {
  std::vector<float> out;
  std::vector<int32_t> tokens;
  for (uint32_t i = 0; i < c.prefill + c.decode; ++i)
    tokens.push_back(static_cast<int32_t>((i * 37 + 11) % c.spec.nEmbd));
  backend::Logits logits;
  uint32_t done = 0;
  while (done < tokens.size()) {
    const uint32_t n = done == 0 ? c.prefill : 1;
    b.setDumpTarget("out");
    KVS_TRY(b.forwardWith({std::span(tokens).subspan(done, n)}, logits, c.op));
    const auto& d = b.dumped();
    if (d.rows == 0) return makeError(ErrorCode::kInternal, "the case wrote no tensor 'out'");
    out.insert(out.end(), d.values.begin(), d.values.end());
    done += n;
  }
  return out;
}

Measured measure(const OpCase& c) {
  Measured m;
  const auto file = openSyntheticModel(c.spec, "test-ops");
  if (!file) return m;
  const std::vector<kv::LayerSchemes> kv(c.spec.nLayer, c.kv);
  auto cpu = backend::CpuBackend::create(file, {.threads = 2, .kvSchemes = kv, .errorStride = 0});
  if (!cpu.ok()) {
    ADD_FAILURE() << c.name << ": " << cpu.error().describe();
    return m;
  }
  // Validation (synchronization included) runs too: an op recorded without the
  // barrier it needs fails here even where the device happens to serialise.
  auto gpu = backend::VulkanBackend::create(
      file, {.validation = true, .timing = false, .kvSchemes = kv, .errorStride = 0});
  if (!gpu.ok()) {
    ADD_FAILURE() << c.name << ": " << gpu.error().describe();
    return m;
  }
  auto want = runOn(**cpu, c), got = runOn(**gpu, c);
  if (!want.ok() || !got.ok()) {
    ADD_FAILURE() << c.name << ": "
                  << (want.ok() ? got.error().describe() : want.error().describe());
    return m;
  }
  if (want->size() != got->size()) {
    ADD_FAILURE() << c.name << ": " << want->size() << " values on the CPU, " << got->size()
                  << " on Vulkan";
    return m;
  }
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < want->size(); ++i) {
    const double d = double{(*got)[i]} - (*want)[i];
    err += d * d;
    ref += double{(*want)[i]} * (*want)[i];
  }
  m.nmse = ref > 0.0 ? err / ref : err;
  m.ran = true;
  EXPECT_EQ((*gpu)->context().validationMessages(), 0u) << c.name << ": Vulkan validation messages";
  return m;
}

model::SyntheticModelSpec shape(uint32_t embd, uint32_t ff, uint32_t heads, uint32_t kvHeads,
                                uint32_t headDim, gguf::TensorType type = gguf::TensorType::kF32) {
  model::SyntheticModelSpec s;
  s.nLayer = 2;
  s.nEmbd = embd;
  s.nFf = ff;
  s.nHead = heads;
  s.nHeadKv = kvHeads;
  s.headDim = headDim;
  s.nVocab = 512;
  s.contextLength = 256;
  s.weightType = type;
  s.seed = embd * 31 + ff * 7 + headDim;
  return s;
}

// Fetches rows of a weight matrix {width, rows} as the op's input, by token.
Status input(ForwardOps& ops, const model::TensorView& table, Act into) {
  return ops.embed(table, into, 1.0f, {"input"});
}

std::vector<OpCase> embedAndRows() {
  std::vector<OpCase> cases;
  for (auto type : {gguf::TensorType::kF32, gguf::TensorType::kF16, gguf::TensorType::kQ8_0,
                    gguf::TensorType::kQ4_K}) {
    OpCase c{.name = fmt::format("embed {}", gguf::typeName(static_cast<uint32_t>(type))),
             .spec = shape(256, 512, 4, 2, 64, type)};
    c.spec.tensorTypes["token_embd.weight"] = type;
    c.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
      return ops.embed(*p.weights->tokenEmbd, ops.act("x", p.config->nEmbd), 1.0f, {"out"});
    };
    cases.push_back(std::move(c));
  }
  // Gemma's scale by sqrt(width).
  OpCase scaled{.name = "embed Q8_0 scaled by 16", .spec = shape(256, 512, 4, 2, 64)};
  scaled.spec.tensorTypes["token_embd.weight"] = gguf::TensorType::kQ8_0;
  scaled.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
    return ops.embed(*p.weights->tokenEmbd, ops.act("x", p.config->nEmbd), 16.0f, {"out"});
  };
  cases.push_back(std::move(scaled));
  OpCase rows{.name = "logit rows", .spec = shape(256, 512, 4, 2, 64), .prefill = 7, .decode = 1};
  rows.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
    const Act x = ops.act("x", p.config->nEmbd);
    KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
    KVS_ASSIGN_OR_RETURN(const Act last, ops.logitRows(x, {"out"}));
    return last.width == x.width ? okStatus()
                                 : makeError(ErrorCode::kInternal, "logit rows lost their width");
  };
  cases.push_back(std::move(rows));
  return cases;
}

std::vector<OpCase> rmsnorms() {
  std::vector<OpCase> cases;
  for (uint32_t width : {64u, 96u, 256u, 1024u, 4096u}) {
    OpCase c{.name = fmt::format("rmsnorm rows of {}", width),
             .spec = shape(width, 128, width / 32, 1, 32),
             .prefill = 9,
             .decode = 1,
             .bound = 1e-10};
    c.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
      const Act x = ops.act("x", p.config->nEmbd), y = ops.act("y", p.config->nEmbd);
      KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
      return ops.rmsnorm(x, p.weights->outputNorm, y, p.config->nEmbd, 1e-5f, {"out"});
    };
    cases.push_back(std::move(c));
  }
  // Per head (qwen3's q/k norm), in place, at head dims 8 to 256.
  for (uint32_t headDim : {8u, 48u, 64u, 128u, 256u}) {
    auto spec = shape(4 * headDim, 128, 4, 2, headDim);
    spec.architecture = "qwen3";
    OpCase c{.name = fmt::format("rmsnorm per head of {}", headDim),
             .spec = spec,
             .prefill = 5,
             .bound = 1e-10};
    c.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
      const Act x = ops.act("x", p.config->nEmbd);
      KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
      return ops.rmsnorm(x, p.weights->layers[0].qNorm, x, p.config->headDim, 1e-6f, {"out"});
    };
    cases.push_back(std::move(c));
  }
  // Without a weight, per head and over a whole row (Gemma 4's V rows).
  for (uint32_t group : {32u, 256u, 512u}) {
    OpCase c{.name = fmt::format("rmsnorm unweighted groups of {}", group),
             .spec = shape(512, 128, 16, 1, 32),
             .prefill = 9,
             .decode = 1,
             .bound = 1e-10};
    c.op = [group](const ForwardPlan& p, ForwardOps& ops) -> Status {
      const Act x = ops.act("x", p.config->nEmbd), y = ops.act("y", p.config->nEmbd);
      KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
      return ops.rmsnorm(x, nullptr, y, group, 1e-6f, {"out"});
    };
    cases.push_back(std::move(c));
  }
  // Normed and added to a residual (Gemma's post-norms): y starts as other rows.
  for (uint32_t width : {256u, 4096u}) {
    OpCase c{.name = fmt::format("rmsnorm added to rows of {}", width),
             .spec = shape(width, 128, width / 32, 1, 32),
             .prefill = 9,
             .decode = 1,
             .bound = 1e-10};
    c.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
      const Act x = ops.act("x", p.config->nEmbd), y = ops.act("y", p.config->nEmbd);
      KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
      KVS_TRY(ops.embed(*p.weights->output, y, 1.0f, {"residual"}));
      return ops.rmsnormAdd(x, *p.weights->outputNorm, y, 1e-6f, {"out"});
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

// Gemma 4's element-wise ops over rows of token_embd (and, for the gated
// product, a column range of ffn_down's wider rows, as its per-layer inputs
// read theirs), at a decode step's and a prefill's rows.
std::vector<OpCase> elementwise() {
  std::vector<OpCase> cases;
  const auto embdRows = [](ForwardOps& ops, const ForwardPlan& p, float scale) -> Expected<Act> {
    const Act x = ops.act("x", p.config->nEmbd);
    KVS_TRY(ops.embed(*p.weights->tokenEmbd, x, scale, {"input"}));
    return x;
  };
  for (uint32_t width : {64u, 1000u}) {
    OpCase scale{.name = fmt::format("scale rows of {}", width),
                 .spec = shape(width, 128, 2, 1, 32),
                 .prefill = 7,
                 .decode = 1};
    scale.op = [embdRows](const ForwardPlan& p, ForwardOps& ops) -> Status {
      KVS_ASSIGN_OR_RETURN(const Act x, embdRows(ops, p, 1.0f));
      return ops.scale(x, 0.0625f * 3.0f, {"out"});
    };
    cases.push_back(std::move(scale));
    OpCase add{.name = fmt::format("add rows of {}", width),
               .spec = shape(width, 128, 2, 1, 32),
               .prefill = 7,
               .decode = 1};
    add.op = [embdRows](const ForwardPlan& p, ForwardOps& ops) -> Status {
      KVS_ASSIGN_OR_RETURN(const Act x, embdRows(ops, p, 1.0f));
      const Act y = ops.act("y", p.config->nEmbd);
      KVS_TRY(ops.embed(*p.weights->output, y, 1.0f, {"residual"}));
      return ops.add(x, y, {"out"});
    };
    cases.push_back(std::move(add));
  }
  // Caps that leave most values linear, and one that saturates most.
  for (float cap : {30.0f, 0.5f, 0.01f}) {
    OpCase c{.name = fmt::format("soft-cap at {}", cap),
             .spec = shape(512, 128, 4, 1, 32),
             .prefill = 7,
             .decode = 1,
             .bound = 1e-11};
    c.op = [embdRows, cap](const ForwardPlan& p, ForwardOps& ops) -> Status {
      KVS_ASSIGN_OR_RETURN(const Act x, embdRows(ops, p, 40.0f));
      return ops.softCap(x, cap, {"out"});
    };
    cases.push_back(std::move(c));
  }
  for (model::Gate gate : {model::Gate::kGelu, model::Gate::kSilu, model::Gate::kSwigluOai}) {
    for (uint32_t upFirst : {0u, 256u, 768u}) {
      // ffn_down {nFf, nEmbd}: rows of nFf = 4 nEmbd values.
      OpCase c{.name = fmt::format("gated product {} of up columns from {}",
                                   gate == model::Gate::kGelu   ? "gelu"
                                   : gate == model::Gate::kSilu ? "silu"
                                                                : "clamped-swiglu",
                                   upFirst),
               .spec = shape(256, 1024, 4, 1, 64),
               .prefill = 7,
               .decode = 1,
               .bound = 1e-10};
      c.op = [embdRows, gate, upFirst](const ForwardPlan& p, ForwardOps& ops) -> Status {
        KVS_ASSIGN_OR_RETURN(const Act g, embdRows(ops, p, 4.0f));
        const Act up = ops.act("up", p.config->nFf);
        KVS_TRY(ops.embed(*p.weights->layers[0].down, up, 1.0f, {"up"}));
        return ops.gatedMul(gate, g, up, upFirst, {"out"});
      };
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

std::vector<OpCase> matmuls() {
  using gguf::TensorType;
  std::vector<OpCase> cases;
  struct Epi {
    const char* name;
    bool bias, accumulate;
    model::Gate gate;
  };
  constexpr auto kNoGate = model::Gate::kNone;
  for (TensorType type :
       {TensorType::kF32, TensorType::kF16, TensorType::kBF16, TensorType::kQ8_0, TensorType::kQ4_0,
        TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ4_K,
        TensorType::kQ5_K, TensorType::kQ6_K, TensorType::kIQ4_NL, TensorType::kIQ4_XS}) {
    // in -> out widths: a square one, a narrow odd output (96 rows), a wide input.
    for (auto [in, out] : {std::pair{256u, 256u}, std::pair{512u, 96u}, std::pair{1024u, 160u}}) {
      for (Epi e : {Epi{"", false, false, kNoGate}, Epi{" +bias", true, false, kNoGate},
                    Epi{" +residual", false, true, kNoGate},
                    Epi{" silu-gate", false, false, model::Gate::kSilu},
                    Epi{" gelu-gate", false, false, model::Gate::kGelu},
                    Epi{" clamped-swiglu-gate", false, false, model::Gate::kSwigluOai}}) {
        const bool epilogue = e.bias || e.accumulate || e.gate != kNoGate;
        if (in != 256 && epilogue) continue;  // epilogues once per type
        auto spec = shape(in, out, 4, 2, in / 4, type);
        spec.architecture = "qwen2";  // for the q/k/v biases
        spec.tensorTypes["token_embd.weight"] = TensorType::kF32;
        // ffn_down's rows are `out` wide, not whole K-quant blocks; it is not read.
        for (const char* down : {"blk.0.ffn_down.weight", "blk.1.ffn_down.weight"})
          spec.tensorTypes[down] = TensorType::kF32;
        OpCase c{.name = fmt::format("matmul {} {}->{}{}",
                                     gguf::typeName(static_cast<uint32_t>(type)), in, out, e.name),
                 .spec = spec,
                 .prefill = 6,
                 .decode = 2,
                 .bound = 1e-9};
        c.op = [e](const ForwardPlan& p, ForwardOps& ops) -> Status {
          const model::LayerWeights& l = p.weights->layers[0];
          const Act x = ops.act("x", p.config->nEmbd), y = ops.act("y", p.config->nFf);
          KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
          if (e.accumulate || e.gate != kNoGate) {  // y holds a residual or a gate first: gate(x)
            KVS_TRY(ops.matmul(*l.gate, x, y, {}, {"y0"}));
          }
          // up: {nEmbd, nFf}; the bias is q's, which the spec makes nFf long
          // (a mismatch fails the op: model::checkEpilogue)
          const model::TensorView* bias = e.bias ? l.bq : nullptr;
          return ops.matmul(*l.up, x, y, {.bias = bias, .accumulate = e.accumulate, .gate = e.gate},
                            {"out"});
        };
        if (e.bias) c.spec.nFf = c.spec.nHead * c.spec.headDim;  // bias {qDim} fits up's rows
        cases.push_back(std::move(c));
      }
    }
  }
  return cases;
}

std::vector<OpCase> ropes() {
  std::vector<OpCase> cases;
  struct R {
    uint32_t headDim, dims;
    bool neox, factors;
    float positionScale, attnFactor;
    float scale = 1.0f;
  };
  for (R r :
       {R{8, 8, false, false, 1, 1}, R{64, 64, true, false, 1, 1}, R{80, 32, false, false, 1, 1},
        R{128, 128, true, true, 1, 1.07f}, R{128, 128, false, false, 4, 1},
        R{256, 256, true, false, 1, 0.125f}, R{128, 96, true, true, 1, 1.07f, 0.088f}}) {
    OpCase c{.name = fmt::format(
                 "rope d{} dims {} {}{}{}{}{}", r.headDim, r.dims, r.neox ? "neox" : "normal",
                 r.factors ? " factors" : "", r.positionScale != 1 ? " linear" : "",
                 r.attnFactor != 1 ? " magnitude" : "", r.scale != 1 ? " scaled" : ""),
             .spec = shape(4 * r.headDim, 128, 4, 2, r.headDim),
             .prefill = 11,
             .decode = 2,
             .bound = 1e-12};
    c.op = [r](const ForwardPlan& p, ForwardOps& ops) -> Status {
      model::RopeSpec spec{.style = r.neox ? model::RopeStyle::kNeox : model::RopeStyle::kNormal,
                           .dims = r.dims,
                           .theta = 10000.0f,
                           .positionScale = r.positionScale,
                           .attnFactor = r.attnFactor,
                           .scale = r.scale};
      if (r.factors)
        for (uint32_t i = 0; i < r.dims / 2; ++i) spec.freqFactors.push_back(1.0f + 0.25f * i);
      const Act x = ops.act("x", p.config->nEmbd);
      KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
      return ops.rope(x, p.config->nHead, p.config->headDim, spec, {"out"});
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

// Attention over a cache of `prefill` rows and a few decode steps. q comes
// from attn_output's rows ({qDim, nEmbd}), k and v from ffn_down's of the two
// layers ({kvDim = nFf, nEmbd}), so they are identical on both sides; the
// scale makes the softmax peaked, as trained models' are.
// A sliding window (window > 0) shorter than the prefill masks rows on both
// sides of the diagonal.
OpCase attentionCase(const std::string& scheme, uint32_t headDim, uint32_t gqa,
                     bool unitScale = false, uint32_t window = 0, uint32_t prefill = 37) {
  const uint32_t kvHeads = 2, heads = kvHeads * gqa;
  auto spec = shape(64, kvHeads * headDim, heads, kvHeads, headDim);
  OpCase c{.name = fmt::format("attention {} d{} gqa {}{}{}{}", scheme, headDim, gqa,
                               unitScale ? " scale 1" : "",
                               window ? fmt::format(" window {}", window) : "",
                               prefill != 37 ? fmt::format(" after {}", prefill) : ""),
           .spec = spec,
           .kv = {scheme, scheme},
           .prefill = prefill,
           .decode = 3,
           .bound = 1e-8};
  c.op = [unitScale, window](const ForwardPlan& p, ForwardOps& ops) -> Status {
    const model::ModelConfig& cfg = *p.config;
    const Act q = ops.act("q", cfg.qDimOf(0)), k = ops.act("k", cfg.kvDimOf(0)),
              v = ops.act("v", cfg.kvDimOf(0)), out = ops.act("att", cfg.qDimOf(0));
    KVS_TRY(ops.embed(*p.weights->layers[0].wo, q, 1.0f, {"q"}));
    KVS_TRY(ops.embed(*p.weights->layers[0].down, k, 1.0f, {"k"}));
    KVS_TRY(ops.embed(*p.weights->layers[1].down, v, 1.0f, {"v"}));
    model::AttentionSpec attention = p.attention(0);
    attention.scale = unitScale ? 1.0f : 16.0f * attention.scale;
    attention.window = window;
    return ops.attention(q, k, v, out, attention, {"out"});
  };
  return c;
}

// Gemma 4's attention: window layers (even) of 4 KV heads of 32 values,
// global ones (odd) of 2 KV heads of 64, in one cache; `layer`'s output.
// Its inputs come from its own tensors: q from attn_output's rows (qDim
// wide), k from ffn_down's (layerFf makes them kvDim wide), v the k rows
// RMS-normed without a weight (Gemma 4's V). Every layer before `layer`
// attends too, so a layer's rows landing in another's place shows.
// `shared`: the last layer reads the cache of layer - 2 (attendCache) with
// its own queries, as a KV-shared layer does. Each layer's inputs have slots
// of their own: the Vulkan backend's embed() writes its rows at recording.
OpCase perLayerAttentionCase(const std::string& scheme, uint32_t layer, bool shared) {
  model::SyntheticModelSpec spec = shape(64, 128, 4, 4, 64);
  spec.architecture = "gemma4";
  spec.nLayer = 4;
  spec.headDimWindow = spec.ropeDimsWindow = 32;
  spec.slidingWindow = 16;
  spec.windowPeriod = 2;
  spec.layerHeadsKv = {4, 2, 4, 2};
  spec.layerFf = {128, 128, 128, 128};  // = each layer's kvDim
  spec.seed = 77 + layer;
  OpCase c{.name = fmt::format("attention {} layer {} of gemma4's shapes{}", scheme, layer,
                               shared ? ", read by a KV-shared layer" : ""),
           .spec = spec,
           .kv = {scheme, scheme},
           .prefill = 29,
           .decode = 3,
           .bound = 1e-8};
  c.op = [layer, shared](const ForwardPlan& p, ForwardOps& ops) -> Status {
    const model::ModelConfig& cfg = *p.config;
    for (uint32_t l = 0; l <= layer; ++l) {
      const uint32_t source = shared && l == layer ? l - 2 : l;
      const std::string i = std::to_string(l);
      const Act q = ops.act("q" + i, cfg.qDimOf(l)), out = ops.act("att", cfg.qDimOf(l));
      KVS_TRY(ops.embed(*p.weights->layers[l].wo, q, 1.0f, {"q"}));
      model::AttentionSpec attention = p.attention(source);
      attention.scale = 1.0f;
      const OpName name = l == layer ? OpName{"out"} : OpName{"att", static_cast<int>(l)};
      if (source != l) {
        KVS_TRY(ops.attendCache(q, out, attention, name));
        continue;
      }
      const Act k = ops.act("k" + i, cfg.kvDimOf(l)), v = ops.act("v" + i, cfg.kvDimOf(l));
      KVS_TRY(ops.embed(*p.weights->layers[l].down, k, 1.0f, {"k"}));
      KVS_TRY(ops.rmsnorm(k, nullptr, v, cfg.headDimOf(l), 1e-6f, {"v"}));
      KVS_TRY(ops.attention(q, k, v, out, attention, name));
    }
    return okStatus();
  };
  return c;
}

std::vector<OpCase> attentions() {
  std::vector<OpCase> cases;
  for (uint32_t headDim : {8u, 48u, 64u, 80u, 128u, 256u})
    for (uint32_t gqa : {1u, 2u, 4u, 8u}) cases.push_back(attentionCase("f16", headDim, gqa));
  cases.push_back(attentionCase("f16", 64, 2, true));  // phi3: queries scaled before
  // gemma3's window layers: the window inside the prefill, and one row.
  for (std::string scheme : {"f16", "q8_0", "turbo4"}) {
    cases.push_back(attentionCase(scheme, 64, 2, true, 16));
    cases.push_back(attentionCase(scheme, 128, 4, false, 1));
  }
  // Past 64 rows a decode step splits the rows: the splits start at the window.
  cases.push_back(attentionCase("f16", 64, 2, true, 24, 150));
  cases.push_back(attentionCase("q8_0", 64, 2, true, 24, 150));
  for (std::string_view scheme : kv::schemeNames()) {
    if (scheme == "f16") continue;
    for (uint32_t headDim : {64u, 128u})
      cases.push_back(attentionCase(std::string(scheme), headDim, 4));
  }
  for (std::string scheme : {"f16", "q8_0", "turbo4"}) {
    for (uint32_t layer : {0u, 1u, 2u, 3u})
      cases.push_back(perLayerAttentionCase(scheme, layer, false));
    cases.push_back(perLayerAttentionCase(scheme, 2, true));  // a window layer's rows
    cases.push_back(perLayerAttentionCase(scheme, 3, true));  // a global layer's
  }
  return cases;
}

// A mixture-of-experts FFN added to a residual: the router (with gpt-oss's
// bias), the picks and weights, each pair's gate, up and down products (with
// gpt-oss's expert biases and clamped SwiGLU) and the weighted sum, expert
// weights in several types, over a prefill that routes several tokens to
// each expert and single decode steps. A pick that differs between the
// backends would move a whole product: NMSE ~ 1, far over the matmul bound.
std::vector<OpCase> moes() {
  using gguf::TensorType;
  std::vector<OpCase> cases;
  for (const char* arch : {"qwen3moe", "gpt-oss"}) {
    for (TensorType type : {TensorType::kF32, TensorType::kQ8_0, TensorType::kQ4_0,
                            TensorType::kQ4_K, TensorType::kQ6_K}) {
      auto spec = shape(256, 256, 4, 2, 64);
      spec.architecture = arch;
      spec.nExpert = 8;
      spec.nExpertUsed = std::string(arch) == "gpt-oss" ? 4 : 2;
      spec.nFfExp = 256;
      for (int l = 0; l < 2; ++l) {
        for (const char* t : {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"})
          spec.tensorTypes[fmt::format("blk.{}.{}.weight", l, t)] = type;
      }
      OpCase c{.name = fmt::format("moe {} experts {}", arch,
                                   gguf::typeName(static_cast<uint32_t>(type))),
               .spec = spec,
               .prefill = 12,
               .decode = 2,
               .bound = 1e-9};
      c.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
        const model::ModelConfig& cfg = *p.config;
        const model::LayerWeights& l = p.weights->layers[1];
        const Act x = ops.act("x", cfg.nEmbd), y = ops.act("y", cfg.nEmbd);
        KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
        KVS_TRY(ops.embed(*p.weights->output, y, 1.0f, {"residual"}));
        const bool oai = cfg.architecture == "gpt-oss";
        const model::MoeSpec moe{.router = l.gateInp,
                                 .routerBias = l.gateInpBias,
                                 .gate = l.gateExps,
                                 .up = l.upExps,
                                 .down = l.downExps,
                                 .gateBias = l.gateExpsBias,
                                 .upBias = l.upExpsBias,
                                 .downBias = l.downExpsBias,
                                 .nExpert = cfg.nExpert,
                                 .nUsed = cfg.nExpertUsed,
                                 .ff = cfg.nFfExp,
                                 .weighting = oai ? model::ExpertWeighting::kTopKSoftmax
                                                  : model::ExpertWeighting::kSoftmaxTopK,
                                 .act = oai ? model::Gate::kSwigluOai : model::Gate::kSilu};
        return ops.moe(x, moe, y, {"out"});
      };
      cases.push_back(std::move(c));
    }
  }
  return cases;
}

// Gemma 4's experts beside its dense FFN: the router on its own norm of the
// residual, one stack of each expert's gate rows then up rows, GeGLU, each
// expert's output times its scale, the weighted sum written (not added), in
// several types of the expert stacks.
std::vector<OpCase> gemma4Moes() {
  using gguf::TensorType;
  std::vector<OpCase> cases;
  for (TensorType type :
       {TensorType::kF32, TensorType::kQ8_0, TensorType::kQ4_K, TensorType::kQ6_K}) {
    auto spec = shape(256, 256, 4, 2, 64);
    spec.architecture = "gemma4";
    spec.nExpert = 8;
    spec.nExpertUsed = 3;
    spec.nFfExp = 256;
    for (int l = 0; l < 2; ++l) {
      for (const char* t : {"ffn_gate_up_exps", "ffn_down_exps"})
        spec.tensorTypes[fmt::format("blk.{}.{}.weight", l, t)] = type;
    }
    OpCase c{
        .name = fmt::format("moe gemma4 experts {}", gguf::typeName(static_cast<uint32_t>(type))),
        .spec = spec,
        .prefill = 12,
        .decode = 2,
        .bound = 1e-9};
    c.op = [](const ForwardPlan& p, ForwardOps& ops) -> Status {
      const model::ModelConfig& cfg = *p.config;
      const model::LayerWeights& l = p.weights->layers[1];
      const Act x = ops.act("x", cfg.nEmbd), y = ops.act("y", cfg.nEmbd);
      const Act routerIn = ops.act("router_in", cfg.nEmbd);
      KVS_TRY(input(ops, *p.weights->tokenEmbd, x));
      KVS_TRY(ops.embed(*p.weights->output, y, 1.0f, {"stale"}));  // overwritten, not added to
      KVS_TRY(ops.rmsnorm(x, l.gateInpScale, routerIn, cfg.nEmbd, 1e-6f, {"router_in"}));
      const model::MoeSpec moe{.router = l.gateInp,
                               .gateUp = l.gateUpExps,
                               .down = l.downExps,
                               .downScale = l.downExpsScale,
                               .routerInput = routerIn,
                               .nExpert = cfg.nExpert,
                               .nUsed = cfg.nExpertUsed,
                               .ff = cfg.nFfExp,
                               .weighting = model::ExpertWeighting::kSoftmaxTopK,
                               .act = model::Gate::kGelu,
                               .accumulate = false};
      return ops.moe(x, moe, y, {"out"});
    };
    cases.push_back(std::move(c));
  }
  return cases;
}

void runCases(const std::vector<OpCase>& cases) {
  for (const OpCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Measured m = measure(c);
    if (!m.ran) continue;
    std::printf("  %-44s NMSE %.2e (bound %.0e)\n", c.name.c_str(), m.nmse, c.bound);
    EXPECT_LE(m.nmse, c.bound) << c.name << ": Vulkan differs from the CPU backend";
  }
}

TEST(TestOps, EmbedAndLogitRows) {
  runCases(embedAndRows());
}
TEST(TestOps, RmsNorm) {
  runCases(rmsnorms());
}
TEST(TestOps, Matmul) {
  runCases(matmuls());
}
TEST(TestOps, Rope) {
  runCases(ropes());
}
TEST(TestOps, MixtureOfExperts) {
  runCases(moes());
  runCases(gemma4Moes());
}
TEST(TestOps, ElementWise) {
  runCases(elementwise());
}
TEST(TestOps, Attention) {
  runCases(attentions());
}

}  // namespace
}  // namespace kvscope::test
