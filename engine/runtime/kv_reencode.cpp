#include "runtime/kv_reencode.h"

#include <cstring>
#include <vector>

#include "backend/codec_error.h"

namespace kvscope::runtime {
namespace {

bool storedAlike(const kv::KvLayout& a, const kv::KvLayout& b, uint32_t layer, kv::KvPart part) {
  return a.scheme(layer, part).name() == b.scheme(layer, part).name() &&
         a.cacheSeed() == b.cacheSeed();
}

}  // namespace

bool canReencode(const kv::KvLayout& from, const kv::KvLayout& to) {
  const kv::KvGeometry& a = from.geometry();
  const kv::KvGeometry& b = to.geometry();
  if (!a.sameStreams(b)) return false;
  for (uint32_t l = 0; l < a.nLayer(); ++l) {
    for (kv::KvPart part : {kv::KvPart::kKey, kv::KvPart::kValue}) {
      if (!storedAlike(from, to, l, part) && from.scheme(l, part).name() != "f16") return false;
    }
  }
  return true;
}

Status reencodeKv(const backend::Backend& from, backend::Backend& to) {
  const kv::KvLayout* src = from.kvLayout();
  const kv::KvLayout* dst = to.kvLayout();
  if (!src || !dst || !canReencode(*src, *dst)) {
    return makeError(ErrorCode::kInternal, "the {} backend's cache cannot be re-encoded into {}'s",
                     from.name(), to.name());
  }
  const kv::KvGeometry& g = src->geometry();
  const uint32_t rows = from.cachedTokens();

  // The rows in the canonical order (layer, K then V, KV head, row), as `to`
  // stores them: built while `from` exports its rows in that same order.
  std::vector<uint8_t> converted;
  converted.reserve(dst->canonicalBytes(rows));
  uint32_t layer = 0, head = 0, row = 0;
  kv::KvPart part = kv::KvPart::kKey;
  std::vector<uint8_t> pending;  // a row split across export spans
  std::vector<float> values, decoded;
  constexpr uint32_t kErrorStride = 16;  // rows measured, as the backends' default
  backend::CodecErrorMeter errors(g.nLayer());
  const auto advance = [&] {
    if (++row < src->keptRows(layer, rows)) return;
    row = 0;
    if (++head < g.nHeadKv(layer)) return;
    head = 0;
    if (part == kv::KvPart::kKey) {
      part = kv::KvPart::kValue;
    } else {
      part = kv::KvPart::kKey;
      ++layer;
    }
  };
  const auto takeRow = [&](std::span<const uint8_t> stored) {
    const size_t at = converted.size();
    converted.resize(at + dst->rowBytes(layer, part));
    const std::span<uint8_t> out(converted.data() + at, dst->rowBytes(layer, part));
    if (storedAlike(*src, *dst, layer, part)) {
      std::memcpy(out.data(), stored.data(), out.size());
    } else {
      values.resize(g.headDim(layer));
      decoded.resize(g.headDim(layer));
      src->scheme(layer, part).decode(stored, values);
      dst->scheme(layer, part).encode(values, out);
      if (row % kErrorStride == 0) {
        dst->scheme(layer, part).decode(out, decoded);
        errors.add(layer, part, values, decoded);
      }
    }
    advance();
  };
  KVS_TRY(from.exportKv([&](std::span<const uint8_t> bytes) -> Status {
    while (!bytes.empty()) {
      if (layer >= g.nLayer()) {
        return makeError(ErrorCode::kInternal, "the exported KV cache holds more rows than {}",
                         rows);
      }
      const size_t rowBytes = src->rowBytes(layer, part);
      if (pending.empty() && bytes.size() >= rowBytes) {
        takeRow(bytes.first(rowBytes));
        bytes = bytes.subspan(rowBytes);
        continue;
      }
      const size_t take = std::min(rowBytes - pending.size(), bytes.size());
      pending.insert(pending.end(), bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(take));
      bytes = bytes.subspan(take);
      if (pending.size() == rowBytes) {
        takeRow(pending);
        pending.clear();
      }
    }
    return okStatus();
  }));
  if (converted.size() != dst->canonicalBytes(rows)) {
    return makeError(ErrorCode::kInternal, "the exported KV cache held {} of {} bytes",
                     converted.size(), dst->canonicalBytes(rows));
  }
  size_t offset = 0;
  KVS_TRY(to.importKv(*dst, rows, [&](std::span<uint8_t> out) -> Status {
    if (offset + out.size() > converted.size())
      return makeError(ErrorCode::kInternal, "the KV import asked past the converted rows");
    std::memcpy(out.data(), converted.data() + offset, out.size());
    offset += out.size();
    return okStatus();
  }));
  // Streams copied as stored keep what `from` measured on them.
  if (const backend::CodecErrorMeter* measured = from.kvErrorMeter()) {
    for (uint32_t l = 0; l < g.nLayer(); ++l) {
      for (kv::KvPart p : {kv::KvPart::kKey, kv::KvPart::kValue})
        if (storedAlike(*src, *dst, l, p)) errors.copyStream(*measured, l, p);
    }
  }
  to.setKvErrors(errors);
  // The same rows, so the same experts picked them.
  if (const backend::ExpertLog* log = from.expertLog()) to.setExpertLog(*log);
  return okStatus();
}

}  // namespace kvscope::runtime
