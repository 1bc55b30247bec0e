#include "gpu/kv_codec.h"

#include <array>

#include "gpu/pipeline.h"

namespace kvscope::gpu {
namespace {

constexpr uint32_t kBlock = 32;       // values per scale block (kv::kKvBlock)
constexpr uint32_t kTurboGroup = 16;  // rotated values per gamma of turbo*g (kv::kTurboGroup)

struct CodecInfo {
  KvCodec codec;
  std::string_view name;
  uint32_t bits;  // bits per code (16 for f16)
  KvCodec plain;  // the codec whose bytes it stores
};

constexpr std::array<CodecInfo, KVS_CODEC_COUNT> kCodecs = {{
    {KvCodec::kF16, "f16", 16, KvCodec::kF16},
    {KvCodec::kQ8_0, "q8_0", 8, KvCodec::kQ8_0},
    {KvCodec::kQ4_0, "q4_0", 4, KvCodec::kQ4_0},
    {KvCodec::kFp8, "fp8", 8, KvCodec::kFp8},
    {KvCodec::kAffine4, "affine4", 4, KvCodec::kAffine4},
    {KvCodec::kTurbo4, "turbo4", 4, KvCodec::kTurbo4},
    {KvCodec::kTurbo3, "turbo3", 3, KvCodec::kTurbo3},
    {KvCodec::kTurbo2, "turbo2", 2, KvCodec::kTurbo2},
    {KvCodec::kTurbo4g, "turbo4g", 4, KvCodec::kTurbo4g},
    {KvCodec::kTurbo3g, "turbo3g", 3, KvCodec::kTurbo3g},
    {KvCodec::kTurbo2g, "turbo2g", 2, KvCodec::kTurbo2g},
    {KvCodec::kTurbo3w10, "turbo3w10", 3, KvCodec::kTurbo3w10},
    {KvCodec::kTurbo4b, "turbo4b", 4, KvCodec::kTurbo4b},
    {KvCodec::kTurbo3b, "turbo3b", 3, KvCodec::kTurbo3b},
    {KvCodec::kTurbo2b, "turbo2b", 2, KvCodec::kTurbo2b},
    {KvCodec::kQ8_0r, "q8_0r", 8, KvCodec::kQ8_0},
    {KvCodec::kQ4_0r, "q4_0r", 4, KvCodec::kQ4_0},
    {KvCodec::kFp8r, "fp8r", 8, KvCodec::kFp8},
    {KvCodec::kAffine4r, "affine4r", 4, KvCodec::kAffine4},
    {KvCodec::kTurbo6b, "turbo6b", 6, KvCodec::kTurbo6b},
    {KvCodec::kTurbo5b, "turbo5b", 5, KvCodec::kTurbo5b},
}};

const CodecInfo& info(KvCodec codec) {
  return kCodecs[static_cast<uint32_t>(codec)];
}

}  // namespace

Expected<KvCodec> kvCodecFor(std::string_view name) {
  for (const CodecInfo& c : kCodecs)
    if (c.name == name) return c.codec;
  return makeError(ErrorCode::kUnsupported, "the Vulkan backend has no kernels for KV scheme '{}'",
                   name);
}

std::string_view kvCodecName(KvCodec codec) {
  return info(codec).name;
}

bool kvCodecRotated(KvCodec codec) {
  return static_cast<uint32_t>(codec) >= KVS_CODEC_TURBO4;
}

bool kvCodecHasCodebook(KvCodec codec) {
  return kvCodecRotated(codec) && kvCodecPlain(codec) == codec;
}

KvCodec kvCodecPlain(KvCodec codec) {
  return info(codec).plain;
}

uint32_t kvCodecBits(KvCodec codec) {
  return info(codec).bits;
}

uint32_t kvCodecScaleWidth(KvCodec codec, uint32_t dim) {
  switch (codec) {
    case KvCodec::kTurbo4g:
    case KvCodec::kTurbo3g:
    case KvCodec::kTurbo2g:
      return kTurboGroup;
    case KvCodec::kTurbo6b:
    case KvCodec::kTurbo5b:
    case KvCodec::kTurbo4b:
    case KvCodec::kTurbo3b:
    case KvCodec::kTurbo2b:
      return kBlock;
    default:
      return dim;
  }
}

uint32_t kvCodecRowBytes(KvCodec codec, uint32_t dim) {
  if (kvCodecPlain(codec) != codec) return kvCodecRowBytes(kvCodecPlain(codec), dim);
  const uint32_t nb = ceilDiv(dim, kBlock);
  uint32_t bytes = 0;
  switch (codec) {
    case KvCodec::kF16:
      bytes = 2 * dim;
      break;
    case KvCodec::kQ8_0:
      bytes = 2 * nb + dim;
      break;
    case KvCodec::kQ4_0:
      bytes = 2 * nb + ceilDiv(dim, 2);
      break;
    case KvCodec::kFp8:
      bytes = nb + dim;
      break;
    case KvCodec::kAffine4:
      bytes = 4 * nb + ceilDiv(dim, 2);
      break;
    case KvCodec::kTurbo3w10:
      bytes = 4 + 4 * ceilDiv(dim, 10);  // gamma, 2 bytes padding, words of 10 codes
      break;
    case KvCodec::kTurbo4:
    case KvCodec::kTurbo3:
    case KvCodec::kTurbo2:
    case KvCodec::kTurbo4g:
    case KvCodec::kTurbo3g:
    case KvCodec::kTurbo2g:
    case KvCodec::kTurbo6b:
    case KvCodec::kTurbo5b:
    case KvCodec::kTurbo4b:
    case KvCodec::kTurbo3b:
    case KvCodec::kTurbo2b: {
      const uint32_t scales = ceilDiv(dim, kvCodecScaleWidth(codec, dim));
      const uint32_t bits = kvCodecBits(codec);
      // Planes (kv/code_packing.h): 2 + 1 bits for 3, nibbles + 1 or 2 for 5, 6.
      const uint32_t codes = bits == 3   ? ceilDiv(dim, 4) + ceilDiv(dim, 8)
                             : bits == 5 ? ceilDiv(dim, 2) + ceilDiv(dim, 8)
                             : bits == 6 ? ceilDiv(dim, 2) + ceilDiv(dim, 4)
                                         : ceilDiv(dim * bits, 8);
      bytes = 2 * scales + codes;
      break;
    }
    case KvCodec::kQ8_0r:
    case KvCodec::kQ4_0r:
    case KvCodec::kFp8r:
    case KvCodec::kAffine4r:
      break;  // their plain codec's, above
  }
  return (bytes + 3) / 4 * 4;
}

Expected<Buffer> uploadRotation(Context& ctx, std::span<const float> rotation) {
  KVS_ASSIGN_OR_RETURN(Buffer b, Buffer::create(ctx, rotation.size_bytes()));
  KVS_TRY(b.upload(rotation));
  return b;
}

}  // namespace kvscope::gpu
