#include "model/hf_experts.h"

#include <cstring>
#include <map>
#include <string>

#include "gguf/block_layout.h"
#include "gguf/dequant.h"
#include "model/description.h"

namespace kvscope::model {
namespace {

namespace mxfp4 = gguf::blocks::mxfp4;
using Entries = std::map<std::string, const SafetensorsEntry*, std::less<>>;

// A checkpoint's MXFP4 block: 32 values in 16 bytes (the exponent apart).
constexpr uint64_t kHfBlockBytes = 16;

std::string shapeText(const std::vector<uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The entry `name` with exactly `shape` (as stored, row-major).
Expected<const SafetensorsEntry*> entry(const Entries& entries, const std::string& name,
                                        const std::vector<uint64_t>& shape) {
  const auto it = entries.find(name);
  if (it == entries.end()) return makeError(ErrorCode::kBadFile, "tensor '{}' is missing", name);
  if (it->second->shape != shape) {
    return makeError(ErrorCode::kBadFile, "tensor '{}' has shape {}, expected {} from config.json",
                     name, shapeText(it->second->shape), shapeText(shape));
  }
  return it->second;
}

// Qwen3-MoE / Mixtral: one [out, in] matrix per expert, copied in expert order.
Status perExpert(const ModelConfig& c, const Entries& entries, std::vector<TensorView>& tensors,
                 std::deque<std::vector<uint8_t>>& owned) {
  struct Part {
    const char* hf;
    const char* gguf;
    uint64_t in, out;
  };
  const Part parts[] = {{"gate_proj", "ffn_gate_exps.weight", c.nEmbd, c.nFfExp},
                        {"up_proj", "ffn_up_exps.weight", c.nEmbd, c.nFfExp},
                        {"down_proj", "ffn_down_exps.weight", c.nFfExp, c.nEmbd}};
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    for (const Part& part : parts) {
      std::vector<uint8_t>& bytes = owned.emplace_back();
      gguf::TensorType type{};
      for (uint32_t e = 0; e < c.nExpert; ++e) {
        KVS_ASSIGN_OR_RETURN(
            const SafetensorsEntry* t,
            entry(entries, fmt::format("model.layers.{}.mlp.experts.{}.{}.weight", l, e, part.hf),
                  {part.out, part.in}));
        if (e == 0) {
          type = t->type;
          bytes.reserve(t->bytes * c.nExpert);
        } else if (t->type != type) {
          return makeError(ErrorCode::kBadFile, "the experts of layer {} mix weight types", l);
        }
        bytes.insert(bytes.end(), t->data, t->data + t->bytes);
      }
      tensors.push_back({fmt::format("blk.{}.{}", l, part.gguf),
                         type,
                         {part.in, part.out, c.nExpert},
                         std::span<const uint8_t>(bytes)});
    }
  }
  return okStatus();
}

// GGUF's MXFP4 block from a Hugging Face one: the exponent first, then value j
// in byte j's low nibble and value j + 16 in its high one (Hugging Face: value
// 2i in byte i's low nibble, 2i + 1 in its high one).
void mxfp4Block(uint8_t exponent, const uint8_t* hf, uint8_t* out) {
  const auto nibble = [&](uint32_t k) {
    return static_cast<uint8_t>(k % 2 ? hf[k / 2] >> 4 : hf[k / 2] & 0x0f);
  };
  out[mxfp4::kE] = exponent;
  for (uint32_t j = 0; j < kHfBlockBytes; ++j)
    out[mxfp4::kQs + j] = static_cast<uint8_t>(nibble(j) | nibble(j + 16) << 4);
}

// Rows `first`, first + step, … (rows of each expert) of an MXFP4 weight
// stored as blocks [E, rows, in / 32, 16] and scales [E, rows, in / 32], as a
// GGUF MXFP4 tensor {in, count, E}.
TensorView mxfp4Rows(const SafetensorsEntry& blocks, const SafetensorsEntry& scales, uint32_t first,
                     uint32_t step, uint64_t count, std::string name,
                     std::deque<std::vector<uint8_t>>& owned) {
  const uint64_t experts = blocks.shape[0], rows = blocks.shape[1], perRow = blocks.shape[2];
  std::vector<uint8_t>& bytes = owned.emplace_back(experts * count * perRow * mxfp4::kBytes);
  uint8_t* out = bytes.data();
  for (uint64_t e = 0; e < experts; ++e) {
    for (uint64_t r = 0; r < count; ++r) {
      const uint64_t row = e * rows + first + r * step;
      for (uint64_t b = 0; b < perRow; ++b, out += mxfp4::kBytes)
        mxfp4Block(scales.data[row * perRow + b], blocks.data + (row * perRow + b) * kHfBlockBytes,
                   out);
    }
  }
  return {std::move(name),
          gguf::TensorType::kMXFP4,
          {perRow * 32, count, experts},
          std::span<const uint8_t>(bytes)};
}

// gpt-oss: MXFP4 expert blocks, gate and up rows interleaved.
Status gptOss(const ModelConfig& c, const Entries& entries, std::vector<TensorView>& tensors,
              std::deque<std::vector<uint8_t>>& owned) {
  const uint64_t nE = c.nExpert, ff = c.nFfExp, width = c.nEmbd;
  if (width % 32 != 0 || ff % 32 != 0)
    return makeError(ErrorCode::kBadFile,
                     "gpt-oss's MXFP4 experts need widths divisible by 32 ({} and {})", width, ff);
  for (uint32_t l = 0; l < c.nLayer; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
    KVS_ASSIGN_OR_RETURN(
        const SafetensorsEntry* gateUpBlocks,
        entry(entries, p + "gate_up_proj_blocks", {nE, 2 * ff, width / 32, kHfBlockBytes}));
    KVS_ASSIGN_OR_RETURN(const SafetensorsEntry* gateUpScales,
                         entry(entries, p + "gate_up_proj_scales", {nE, 2 * ff, width / 32}));
    KVS_ASSIGN_OR_RETURN(
        const SafetensorsEntry* downBlocks,
        entry(entries, p + "down_proj_blocks", {nE, width, ff / 32, kHfBlockBytes}));
    KVS_ASSIGN_OR_RETURN(const SafetensorsEntry* downScales,
                         entry(entries, p + "down_proj_scales", {nE, width, ff / 32}));
    KVS_ASSIGN_OR_RETURN(const SafetensorsEntry* gateUpBias,
                         entry(entries, p + "gate_up_proj_bias", {nE, 2 * ff}));
    KVS_ASSIGN_OR_RETURN(const SafetensorsEntry* downBias,
                         entry(entries, p + "down_proj_bias", {nE, width}));
    for (const SafetensorsEntry* t : {gateUpBlocks, gateUpScales, downBlocks, downScales}) {
      if (gguf::traits(t->type).blockBytes != 1)
        return makeError(ErrorCode::kBadFile, "tensor '{}' must hold bytes (U8)", t->name);
    }
    const std::string blk = fmt::format("blk.{}.", l);
    tensors.push_back(
        mxfp4Rows(*gateUpBlocks, *gateUpScales, 0, 2, ff, blk + "ffn_gate_exps.weight", owned));
    tensors.push_back(
        mxfp4Rows(*gateUpBlocks, *gateUpScales, 1, 2, ff, blk + "ffn_up_exps.weight", owned));
    tensors.push_back(
        mxfp4Rows(*downBlocks, *downScales, 0, 1, width, blk + "ffn_down_exps.weight", owned));
    // The biases: gate and up de-interleaved (as float32), down as stored.
    std::vector<float> both(nE * 2 * ff);
    KVS_TRY(gguf::dequantize(gateUpBias->type, {gateUpBias->data, gateUpBias->bytes}, both));
    for (uint32_t half = 0; half < 2; ++half) {
      std::vector<uint8_t>& bytes = owned.emplace_back(nE * ff * sizeof(float));
      auto* out = reinterpret_cast<float*>(bytes.data());
      for (uint64_t i = 0; i < nE * ff; ++i) out[i] = both[2 * i + half];
      tensors.push_back({blk + (half ? "ffn_up_exps.bias" : "ffn_gate_exps.bias"),
                         gguf::TensorType::kF32,
                         {ff, nE},
                         std::span<const uint8_t>(bytes)});
    }
    tensors.push_back({blk + "ffn_down_exps.bias",
                       downBias->type,
                       {width, nE},
                       {downBias->data, downBias->bytes}});
  }
  return okStatus();
}

}  // namespace

Status assembleHfExperts(const ModelConfig& c, std::span<const SafetensorsEntry* const> unmapped,
                         std::vector<TensorView>& tensors,
                         std::deque<std::vector<uint8_t>>& owned) {
  const HfExperts layout = c.arch->description->hfExperts;
  if (layout == HfExperts::kNone || c.nExpert == 0) return okStatus();
  Entries entries;
  constexpr std::string_view kLanguageModel = "language_model.";
  for (const SafetensorsEntry* e : unmapped) {
    std::string_view name = e->name;
    if (name.starts_with(kLanguageModel)) name.remove_prefix(kLanguageModel.size());
    entries.emplace(std::string(name), e);
  }
  return layout == HfExperts::kPerExpert ? perExpert(c, entries, tensors, owned)
                                         : gptOss(c, entries, tensors, owned);
}

}  // namespace kvscope::model
