#pragma once
// Hand assembly of GGUF images for tests, written from the format definition
// (little-endian fields; strings are a uint64 length then bytes) and
// independent of GgufWriter, so reader and writer are each checked against
// the spec rather than against each other.

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace kvscope::gguf::test {

class Bytes {
 public:
  template <typename T>
  Bytes& put(T v) {
    const size_t at = m_data.size();
    m_data.resize(at + sizeof(T));
    std::memcpy(m_data.data() + at, &v, sizeof(T));
    return *this;
  }
  Bytes& u8(uint8_t v) { return put(v); }
  Bytes& u32(uint32_t v) { return put(v); }
  Bytes& u64(uint64_t v) { return put(v); }
  Bytes& str(std::string_view s) {
    u64(s.size());
    m_data.insert(m_data.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(std::span<const uint8_t> b) {
    m_data.insert(m_data.end(), b.begin(), b.end());
    return *this;
  }
  Bytes& zeros(size_t n) {
    m_data.resize(m_data.size() + n);
    return *this;
  }
  Bytes& padTo(size_t alignment) {
    m_data.resize((m_data.size() + alignment - 1) / alignment * alignment);
    return *this;
  }
  size_t size() const { return m_data.size(); }
  const std::vector<uint8_t>& data() const { return m_data; }
  std::vector<uint8_t>& data() { return m_data; }

 private:
  std::vector<uint8_t> m_data;
};

inline constexpr uint32_t kMagic = 0x46554747;  // bytes 'G' 'G' 'U' 'F'

// GGUF value type numbers from the spec.
enum RawType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kStr = 8,
  kArr = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

inline Bytes header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  Bytes b;
  b.u32(kMagic).u32(version).u64(tensors).u64(kvs);
  return b;
}

// A tensor table entry: name, dimension count, dims, ggml type, data offset.
inline Bytes& tensorEntry(Bytes& b, std::string_view name, std::initializer_list<uint64_t> dims,
                          uint32_t type, uint64_t offset) {
  b.str(name).u32(static_cast<uint32_t>(dims.size()));
  for (uint64_t d : dims) b.u64(d);
  return b.u32(type).u64(offset);
}

// A complete file with no metadata and one tensor of `dims` and `type`, whose data
// (`dataBytes` zero bytes) follows the tensor table at 32-byte alignment.
inline std::vector<uint8_t> oneTensorFile(std::string_view name,
                                          std::initializer_list<uint64_t> dims, uint32_t type,
                                          uint64_t offset, size_t dataBytes) {
  Bytes b = header(1, 0);
  tensorEntry(b, name, dims, type, offset).padTo(32).zeros(dataBytes);
  return b.data();
}

}  // namespace kvscope::gguf::test
