// Parsing and validation of a GGUF image: header, metadata, tensor table and
// data layout. Every count and length is checked against the bytes left in the
// file before anything is allocated from it, every product of untrusted
// numbers is overflow-checked, and every error names the key or tensor at
// fault with the offending numbers.
#include <array>
#include <bit>
#include <cstring>
#include <limits>

#include <fmt/ranges.h>

#include "gguf/gguf_file.h"
#include "gguf/gguf_format.h"

namespace kvscope::gguf {
namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
// Smallest encodings: a key/value is an 8-byte key length, a 4-byte type and a
// 1-byte value; a tensor entry an 8-byte name length, a 4-byte dimension
// count, one 8-byte dimension, a 4-byte type and an 8-byte offset.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

Error badFile(std::string message) {
  return Error{ErrorCode::kBadFile, std::move(message)};
}

Error withContext(Error e, std::string_view context) {
  e.message = fmt::format("{}: {}", context, e.message);
  return e;
}

// A name from an untrusted file, bounded and with control bytes escaped, so an
// error message stays one readable line.
std::string printable(std::string_view s) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > kMaxShown) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

// Bounds-checked little-endian reads over the image.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size) : m_data(data), m_size(size) {}

  uint64_t pos() const { return m_pos; }
  uint64_t remaining() const { return m_size - m_pos; }

  template <typename T>
  Expected<T> read() {
    if (remaining() < sizeof(T)) {
      return badFile(fmt::format("the file ends at offset {}, inside a {}-byte field at offset {}",
                                 m_size, sizeof(T), m_pos));
    }
    T v;
    std::memcpy(&v, m_data + m_pos, sizeof(T));
    m_pos += sizeof(T);
    return v;
  }

  Expected<std::string> readString() {
    KVS_ASSIGN_OR_RETURN(const uint64_t length, read<uint64_t>());
    if (length > remaining()) {
      return badFile(fmt::format("a string at offset {} claims {} bytes but only {} remain",
                                 m_pos - 8, length, remaining()));
    }
    std::string s(reinterpret_cast<const char*>(m_data + m_pos), static_cast<size_t>(length));
    m_pos += length;
    return s;
  }

 private:
  const uint8_t* m_data;
  uint64_t m_size;
  uint64_t m_pos = 0;
};

template <typename T, typename Field>
Status readInto(Cursor& c, Field& field) {
  auto v = c.read<T>();
  if (!v.ok()) return v.takeError();
  field = static_cast<Field>(*v);
  return okStatus();
}

// Reads metadata values, charging every value against one budget for the file.
class ValueReader {
 public:
  explicit ValueReader(Cursor& c) : m_c(c) {}

  Status charge(uint64_t values) {
    if (values > m_valuesLeft) {
      return badFile(fmt::format("the metadata holds more than {} values, far more than any model",
                                 format::kMaxMetadataValues));
    }
    m_valuesLeft -= values;
    return okStatus();
  }

  Status read(ValueType type, Value& out, int depth) {
    out.type = type;
    switch (type) {
      case ValueType::kUint8:
        return readInto<uint8_t>(m_c, out.u);
      case ValueType::kInt8:
        return readInto<int8_t>(m_c, out.i);
      case ValueType::kUint16:
        return readInto<uint16_t>(m_c, out.u);
      case ValueType::kInt16:
        return readInto<int16_t>(m_c, out.i);
      case ValueType::kUint32:
        return readInto<uint32_t>(m_c, out.u);
      case ValueType::kInt32:
        return readInto<int32_t>(m_c, out.i);
      case ValueType::kUint64:
        return readInto<uint64_t>(m_c, out.u);
      case ValueType::kInt64:
        return readInto<int64_t>(m_c, out.i);
      case ValueType::kFloat32:
        return readInto<float>(m_c, out.f);
      case ValueType::kFloat64:
        return readInto<double>(m_c, out.f);
      case ValueType::kBool: {
        KVS_TRY(readInto<uint8_t>(m_c, out.u));
        out.u = out.u != 0 ? 1 : 0;
        return okStatus();
      }
      case ValueType::kString: {
        KVS_ASSIGN_OR_RETURN(out.s, m_c.readString());
        return okStatus();
      }
      case ValueType::kArray:
        return readArray(out, depth);
    }
    return badFile(fmt::format("unknown value type {}", static_cast<uint32_t>(type)));
  }

 private:
  Status readArray(Value& out, int depth) {
    if (depth >= format::kMaxNesting) {
      return badFile(
          fmt::format("arrays are nested more than {} levels deep", format::kMaxNesting));
    }
    KVS_ASSIGN_OR_RETURN(const uint32_t rawType, m_c.read<uint32_t>());
    if (!format::isValueType(rawType)) {
      return badFile(fmt::format("array element type {} is not a GGUF value type", rawType));
    }
    const auto elementType = static_cast<ValueType>(rawType);
    KVS_ASSIGN_OR_RETURN(const uint64_t count, m_c.read<uint64_t>());
    const uint64_t minBytes = format::minEncodedBytes(elementType);
    if (count > m_c.remaining() / minBytes) {
      return badFile(fmt::format(
          "an array claims {} {} elements (at least {} bytes each) but only {} bytes remain", count,
          valueTypeName(elementType), minBytes, m_c.remaining()));
    }
    KVS_TRY(charge(count));
    out.elementType = elementType;
    out.array.resize(static_cast<size_t>(count));
    for (size_t i = 0; i < out.array.size(); ++i) {
      if (Status s = read(elementType, out.array[i], depth + 1); !s.ok())
        return withContext(s.takeError(), fmt::format("element {}", i));
    }
    return okStatus();
  }

  Cursor& m_c;
  uint64_t m_valuesLeft = format::kMaxMetadataValues;
};

struct Header {
  uint32_t version = 0;
  uint64_t tensorCount = 0;
  uint64_t kvCount = 0;
};

Status checkVersion(uint32_t version) {
  if (version >= format::kMinVersion && version <= format::kMaxVersion) return okStatus();
  if (version == 1) {
    return badFile(
        "GGUF version 1 is obsolete and not supported; convert the model again with a current "
        "llama.cpp");
  }
  const uint32_t swapped = __builtin_bswap32(version);
  if (swapped >= 1 && swapped <= format::kMaxVersion)
    return badFile("big-endian GGUF files are not supported");
  return badFile(fmt::format("unsupported GGUF version {} (this build reads versions {} and {})",
                             version, format::kMinVersion, format::kMaxVersion));
}

Expected<Header> readHeader(Cursor& c) {
  auto magic = c.read<uint32_t>();
  if (!magic.ok()) return badFile("the file is too short to be GGUF");
  if (*magic != format::kMagic) {
    const auto b = std::bit_cast<std::array<uint8_t, 4>>(*magic);
    return badFile(
        fmt::format("not a GGUF file (it starts with bytes {:02x} {:02x} {:02x} {:02x}, "
                    "expected 'GGUF')",
                    b[0], b[1], b[2], b[3]));
  }
  Header h;
  auto version = c.read<uint32_t>();
  if (!version.ok()) return withContext(version.takeError(), "GGUF version");
  h.version = *version;
  KVS_TRY(checkVersion(h.version));
  auto tensorCount = c.read<uint64_t>();
  if (!tensorCount.ok()) return withContext(tensorCount.takeError(), "tensor count");
  auto kvCount = c.read<uint64_t>();
  if (!kvCount.ok()) return withContext(kvCount.takeError(), "metadata count");
  h.tensorCount = *tensorCount;
  h.kvCount = *kvCount;
  if (h.kvCount > c.remaining() / kMinKeyValueBytes) {
    return badFile(
        fmt::format("the header claims {} metadata entries but the {} bytes left hold at "
                    "most {}",
                    h.kvCount, c.remaining(), c.remaining() / kMinKeyValueBytes));
  }
  if (h.tensorCount > c.remaining() / kMinTensorInfoBytes) {
    return badFile(fmt::format("the header claims {} tensors but the {} bytes left hold at most {}",
                               h.tensorCount, c.remaining(), c.remaining() / kMinTensorInfoBytes));
  }
  return h;
}

Expected<std::vector<KeyValue>> readMetadata(Cursor& c, uint64_t count) {
  ValueReader reader(c);
  KVS_TRY(reader.charge(count));
  std::vector<KeyValue> kv;
  kv.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    KeyValue entry;
    auto key = c.readString();
    if (!key.ok()) return withContext(key.takeError(), fmt::format("metadata entry {}", i));
    entry.key = std::move(*key);
    const std::string context = fmt::format("metadata key '{}'", printable(entry.key));
    auto rawType = c.read<uint32_t>();
    if (!rawType.ok()) return withContext(rawType.takeError(), context);
    if (!format::isValueType(*rawType))
      return withContext(badFile(fmt::format("unknown value type {}", *rawType)), context);
    Status s = reader.read(static_cast<ValueType>(*rawType), entry.value, 0);
    if (!s.ok()) return withContext(s.takeError(), context);
    kv.push_back(std::move(entry));
  }
  return kv;
}

Expected<uint64_t> alignmentOf(const Value* v) {
  if (!v) return format::kDefaultAlignment;
  const bool isUnsigned = v->type == ValueType::kUint8 || v->type == ValueType::kUint16 ||
                          v->type == ValueType::kUint32 || v->type == ValueType::kUint64;
  if (!isUnsigned) {
    return badFile(fmt::format("{} has type {}, expected uint32", format::kAlignmentKey,
                               valueTypeName(v->type)));
  }
  if (!std::has_single_bit(v->u) || v->u > format::kMaxAlignment) {
    return badFile(fmt::format("{} is {}, expected a power of two from 1 to {}",
                               format::kAlignmentKey, v->u, format::kMaxAlignment));
  }
  return v->u;
}

std::string shapeString(const std::vector<uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// Everything of a tensor entry after its name.
Status readTensorFields(Cursor& c, TensorInfo& t) {
  KVS_ASSIGN_OR_RETURN(const uint32_t nDims, c.read<uint32_t>());
  if (nDims == 0 || nDims > format::kMaxDims)
    return badFile(fmt::format("{} dimensions (GGUF allows 1 to {})", nDims, format::kMaxDims));
  t.shape.resize(nDims);
  for (uint64_t& dim : t.shape) {
    KVS_ASSIGN_OR_RETURN(dim, c.read<uint64_t>());
  }
  // ggml counts elements in int64_t, so the product must stay below 2^63.
  uint64_t elements = 1;
  for (uint64_t dim : t.shape) {
    if (dim > kInt64Max || (dim != 0 && elements > kInt64Max / dim))
      return badFile(fmt::format("shape {} has 2^63 or more elements", shapeString(t.shape)));
    elements *= dim;
  }
  KVS_ASSIGN_OR_RETURN(const uint32_t rawType, c.read<uint32_t>());
  if (!typeTraits(rawType)) {
    return badFile(
        fmt::format("unknown tensor type {} (a ggml type this build does not know)", rawType));
  }
  t.type = static_cast<TensorType>(rawType);
  KVS_ASSIGN_OR_RETURN(t.offset, c.read<uint64_t>());
  return okStatus();
}

Expected<std::vector<TensorInfo>> readTensorTable(Cursor& c, uint64_t count) {
  std::vector<TensorInfo> tensors;
  tensors.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    TensorInfo t;
    auto name = c.readString();
    if (!name.ok()) return withContext(name.takeError(), fmt::format("tensor {}", i));
    t.name = std::move(*name);
    if (Status s = readTensorFields(c, t); !s.ok())
      return withContext(s.takeError(), fmt::format("tensor '{}'", printable(t.name)));
    tensors.push_back(std::move(t));
  }
  return tensors;
}

// Sizes a tensor and checks that its data is aligned and inside the file.
Status checkTensorData(TensorInfo& t, uint64_t dataOffset, uint64_t alignment, uint64_t fileSize) {
  const TypeTraits tt = traits(t.type);
  if (t.shape[0] % tt.blockElements != 0) {
    return badFile(fmt::format("rows of {} values are not whole {} blocks of {} values", t.shape[0],
                               tt.name, tt.blockElements));
  }
  const std::optional<uint64_t> bytes = byteSize(t.type, t.elements());
  if (!bytes) {
    return badFile(fmt::format("shape {} of type {} needs more than 2^64 bytes",
                               shapeString(t.shape), tt.name));
  }
  t.bytes = *bytes;
  if (t.offset % alignment != 0) {
    return badFile(
        fmt::format("data offset {} is not a multiple of the alignment {}", t.offset, alignment));
  }
  const uint64_t dataSize = fileSize > dataOffset ? fileSize - dataOffset : 0;
  if (t.offset > dataSize || t.bytes > dataSize - t.offset) {
    return badFile(fmt::format(
        "data [offset {}, {} bytes] extends past the end of the file (size {}, data section at {})",
        t.offset, t.bytes, fileSize, dataOffset));
  }
  return okStatus();
}

// Indexes names; a repeated name is refused because lookups would be ambiguous.
template <typename Entry, typename NameOf>
Status indexNames(const std::vector<Entry>& entries, NameOf nameOf, const char* what,
                  std::unordered_map<std::string_view, size_t>& index) {
  index.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& name = nameOf(entries[i]);
    if (!index.emplace(name, i).second)
      return badFile(fmt::format("{} '{}' appears more than once", what, printable(name)));
  }
  return okStatus();
}

}  // namespace

Status GgufFile::parse() {
  Cursor c(m_base, m_size);
  KVS_ASSIGN_OR_RETURN(const Header header, readHeader(c));
  m_version = header.version;
  KVS_ASSIGN_OR_RETURN(m_kv, readMetadata(c, header.kvCount));
  KVS_TRY(indexNames(
      m_kv, [](const KeyValue& kv) -> const std::string& { return kv.key; }, "metadata key",
      m_kvIndex));
  KVS_ASSIGN_OR_RETURN(m_alignment, alignmentOf(find(format::kAlignmentKey)));
  KVS_ASSIGN_OR_RETURN(m_tensors, readTensorTable(c, header.tensorCount));
  KVS_TRY(indexNames(
      m_tensors, [](const TensorInfo& t) -> const std::string& { return t.name; }, "tensor name",
      m_tensorIndex));
  // c.pos() <= m_size and m_alignment <= 2^20, so this cannot overflow.
  m_dataOffset = (c.pos() + m_alignment - 1) / m_alignment * m_alignment;
  for (TensorInfo& t : m_tensors) {
    if (Status s = checkTensorData(t, m_dataOffset, m_alignment, m_size); !s.ok())
      return withContext(s.takeError(), fmt::format("tensor '{}'", printable(t.name)));
  }
  return okStatus();
}

}  // namespace kvscope::gguf
