#pragma once
// The device side of the KV row schemes (engine/kv/kv_scheme.h): which codec a
// (layer, K|V) stream of the paged device cache uses, and that codec's row
// size. The gpu layer sits below kv, so the backend describes each stream's
// kv::KvScheme with this plain data: the codec id, the scheme's codebook and,
// for rotated schemes, its d x d rotation R uploaded once to the device.
//
// Every codec stores the bytes of the kv scheme of the same name: exactly,
// where both sides compute the same floats; a rotated codec's device
// rotation of a row that is not a power of two long may differ from the
// CPU's in its last bits (tests/gpu/kv_codec_test.cpp checks parity per
// codec and says how far).

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gpu/buffer.h"
#include "shaders/kv_codec.h"

namespace kvscope::gpu {

enum class KvCodec : uint32_t {
  kF16 = KVS_CODEC_F16,
  kQ8_0 = KVS_CODEC_Q8_0,
  kQ4_0 = KVS_CODEC_Q4_0,
  kFp8 = KVS_CODEC_FP8,
  kAffine4 = KVS_CODEC_AFFINE4,
  kTurbo4 = KVS_CODEC_TURBO4,
  kTurbo3 = KVS_CODEC_TURBO3,
  kTurbo2 = KVS_CODEC_TURBO2,
  kTurbo4g = KVS_CODEC_TURBO4G,
  kTurbo3g = KVS_CODEC_TURBO3G,
  kTurbo2g = KVS_CODEC_TURBO2G,
  kTurbo3w10 = KVS_CODEC_TURBO3W10,  // layout experiment (shaders/kv_codec.h), bench only
  kTurbo4b = KVS_CODEC_TURBO4B,
  kTurbo3b = KVS_CODEC_TURBO3B,
  kTurbo2b = KVS_CODEC_TURBO2B,
  kQ8_0r = KVS_CODEC_Q8_0R,
  kQ4_0r = KVS_CODEC_Q4_0R,
  kFp8r = KVS_CODEC_FP8R,
  kAffine4r = KVS_CODEC_AFFINE4R,
  kTurbo6b = KVS_CODEC_TURBO6B,
  kTurbo5b = KVS_CODEC_TURBO5B,
};

// The codec of kv scheme `name`; kUnsupported for a scheme without GPU kernels.
Expected<KvCodec> kvCodecFor(std::string_view name);
std::string_view kvCodecName(KvCodec codec);
// Bytes of one row of `dim` values (the kv scheme's rowBytes()).
uint32_t kvCodecRowBytes(KvCodec codec, uint32_t dim);
// The rotated codecs store the row y = R x: the turbo codecs as codes of a
// codebook of 2^bits centroids (kvCodecHasCodebook), the rotated block
// formats in the bytes of their plain format (kvCodecPlain: the codec whose
// bytes a codec stores; itself for all but the rotated block formats).
bool kvCodecRotated(KvCodec codec);
bool kvCodecHasCodebook(KvCodec codec);
KvCodec kvCodecPlain(KvCodec codec);
uint32_t kvCodecBits(KvCodec codec);
// Codebook codecs: values per scale (dim, 16 for turbo*g, 32 for turbo*b).
uint32_t kvCodecScaleWidth(KvCodec codec, uint32_t dim);

// How one (layer, K|V) stream stores its rows.
struct KvStream {
  KvCodec codec = KvCodec::kF16;
  std::vector<float> codebook;       // codebook codecs: the 2^bits ascending centroids
  const Buffer* rotation = nullptr;  // rotated codecs: R, d x d floats row-major (y = R x);
                                     // owned by the caller, alive while the layout is used
};

// A device buffer holding a rotation (d x d floats), for KvStream::rotation.
Expected<Buffer> uploadRotation(Context& ctx, std::span<const float> rotation);

}  // namespace kvscope::gpu
