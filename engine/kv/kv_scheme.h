#pragma once
// A KV scheme turns one cached row (the K or V vector of one token for one KV
// head, `dim` values) into a fixed number of bytes and back. K and V choose
// schemes independently. Every scheme works for any dim (a final partial block
// is allowed). This header is the CPU reference; GPU kernels of a scheme must
// produce the same bytes (encode) and the same values (decode).
//
// Accounting: rowLayout() splits a row's bytes into codes, scales/norms and
// padding; bitsPerValue() is derived from it, never from a formula elsewhere.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace kvscope::kv {

struct RowLayout {
  uint32_t codeBytes = 0;
  uint32_t scaleBytes = 0;    // scales, norms, minima
  uint32_t paddingBytes = 0;  // alignment the layout needs
  uint32_t total() const { return codeBytes + scaleBytes + paddingBytes; }
};

class KvScheme {
 public:
  virtual ~KvScheme() = default;
  virtual std::string_view name() const = 0;
  virtual RowLayout rowLayout(uint32_t dim) const = 0;
  uint32_t rowBytes(uint32_t dim) const { return rowLayout(dim).total(); }
  double bitsPerValue(uint32_t dim) const { return 8.0 * rowBytes(dim) / dim; }
  // row: dim floats -> out: rowBytes(dim) bytes.
  virtual void encode(std::span<const float> row, std::span<uint8_t> out) const = 0;
  // in: rowBytes(dim) bytes -> row: dim floats.
  virtual void decode(std::span<const uint8_t> in, std::span<float> row) const = 0;
};

// The scheme registered under `name` ("f16", …), or an error listing the names.
Expected<std::shared_ptr<const KvScheme>> findScheme(std::string_view name);
std::vector<std::string_view> schemeNames();

}  // namespace kvscope::kv
