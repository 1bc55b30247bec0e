#include "gguf/gguf_writer.h"

#include <cstring>
#include <limits>

#include "core/atomic_file.h"
#include "gguf/gguf_format.h"
#include "gguf/quantize.h"

namespace kvscope::gguf {
namespace {

Error invalid(std::string message) {
  return Error{ErrorCode::kInvalidArgument, std::move(message)};
}

Value scalar(ValueType type) {
  Value v;
  v.type = type;
  return v;
}

template <typename T>
bool fitsSigned(int64_t v) {
  return v >= std::numeric_limits<T>::min() && v <= std::numeric_limits<T>::max();
}

// Checks that `v` can be written as its declared type.
Status validate(const Value& v, int depth) {
  const uint32_t raw = static_cast<uint32_t>(v.type);
  if (!format::isValueType(raw)) return invalid(fmt::format("value type {} does not exist", raw));
  bool fits = true;
  switch (v.type) {
    case ValueType::kUint8:
      fits = v.u <= std::numeric_limits<uint8_t>::max();
      break;
    case ValueType::kUint16:
      fits = v.u <= std::numeric_limits<uint16_t>::max();
      break;
    case ValueType::kUint32:
      fits = v.u <= std::numeric_limits<uint32_t>::max();
      break;
    case ValueType::kBool:
      fits = v.u <= 1;
      break;
    case ValueType::kInt8:
      fits = fitsSigned<int8_t>(v.i);
      break;
    case ValueType::kInt16:
      fits = fitsSigned<int16_t>(v.i);
      break;
    case ValueType::kInt32:
      fits = fitsSigned<int32_t>(v.i);
      break;
    case ValueType::kArray: {
      if (depth >= format::kMaxNesting)
        return invalid(fmt::format("arrays nested more than {} levels", format::kMaxNesting));
      for (size_t i = 0; i < v.array.size(); ++i) {
        if (v.array[i].type != v.elementType) {
          return invalid(fmt::format("element {} is {} in an array of {}", i,
                                     valueTypeName(v.array[i].type), valueTypeName(v.elementType)));
        }
        KVS_TRY(validate(v.array[i], depth + 1));
      }
      break;
    }
    default:
      break;
  }
  if (!fits) {
    return invalid(fmt::format(
        "value {} does not fit {}",
        v.type == ValueType::kInt8 || v.type == ValueType::kInt16 || v.type == ValueType::kInt32
            ? std::to_string(v.i)
            : std::to_string(v.u),
        valueTypeName(v.type)));
  }
  return okStatus();
}

Expected<uint64_t> alignmentOf(const std::vector<KeyValue>& kv) {
  for (const KeyValue& e : kv) {
    if (e.key != format::kAlignmentKey) continue;
    if (e.value.type != ValueType::kUint32 || !std::has_single_bit(e.value.u) ||
        e.value.u > format::kMaxAlignment) {
      return invalid(fmt::format("{} must be a uint32 power of two up to {}", format::kAlignmentKey,
                                 format::kMaxAlignment));
    }
    return e.value.u;
  }
  return format::kDefaultAlignment;
}

// Appends little-endian fields to a byte vector.
class Sink {
 public:
  explicit Sink(std::vector<uint8_t>& out) : m_out(out) {}

  template <typename T>
  void put(T v) {
    const size_t at = m_out.size();
    m_out.resize(at + sizeof(T));
    std::memcpy(m_out.data() + at, &v, sizeof(T));
  }
  void putString(std::string_view s) {
    put<uint64_t>(s.size());
    m_out.insert(m_out.end(), s.begin(), s.end());
  }
  void putBytes(std::span<const uint8_t> b) { m_out.insert(m_out.end(), b.begin(), b.end()); }
  void padTo(uint64_t alignment) {
    m_out.resize((m_out.size() + alignment - 1) / alignment * alignment);
  }

  void putValue(const Value& v) {
    switch (v.type) {
      case ValueType::kUint8:
        return put(static_cast<uint8_t>(v.u));
      case ValueType::kInt8:
        return put(static_cast<int8_t>(v.i));
      case ValueType::kUint16:
        return put(static_cast<uint16_t>(v.u));
      case ValueType::kInt16:
        return put(static_cast<int16_t>(v.i));
      case ValueType::kUint32:
        return put(static_cast<uint32_t>(v.u));
      case ValueType::kInt32:
        return put(static_cast<int32_t>(v.i));
      case ValueType::kUint64:
        return put(v.u);
      case ValueType::kInt64:
        return put(v.i);
      case ValueType::kFloat32:
        return put(static_cast<float>(v.f));
      case ValueType::kFloat64:
        return put(v.f);
      case ValueType::kBool:
        return put(static_cast<uint8_t>(v.u != 0));
      case ValueType::kString:
        return putString(v.s);
      case ValueType::kArray:
        put(static_cast<uint32_t>(v.elementType));
        put<uint64_t>(v.array.size());
        for (const Value& e : v.array) putValue(e);
        return;
    }
  }

 private:
  std::vector<uint8_t>& m_out;
};

}  // namespace

Value uint8Value(uint8_t v) {
  Value r = scalar(ValueType::kUint8);
  r.u = v;
  return r;
}
Value int8Value(int8_t v) {
  Value r = scalar(ValueType::kInt8);
  r.i = v;
  return r;
}
Value uint16Value(uint16_t v) {
  Value r = scalar(ValueType::kUint16);
  r.u = v;
  return r;
}
Value int16Value(int16_t v) {
  Value r = scalar(ValueType::kInt16);
  r.i = v;
  return r;
}
Value uint32Value(uint32_t v) {
  Value r = scalar(ValueType::kUint32);
  r.u = v;
  return r;
}
Value int32Value(int32_t v) {
  Value r = scalar(ValueType::kInt32);
  r.i = v;
  return r;
}
Value uint64Value(uint64_t v) {
  Value r = scalar(ValueType::kUint64);
  r.u = v;
  return r;
}
Value int64Value(int64_t v) {
  Value r = scalar(ValueType::kInt64);
  r.i = v;
  return r;
}
Value float32Value(float v) {
  Value r = scalar(ValueType::kFloat32);
  r.f = v;
  return r;
}
Value float64Value(double v) {
  Value r = scalar(ValueType::kFloat64);
  r.f = v;
  return r;
}
Value boolValue(bool v) {
  Value r = scalar(ValueType::kBool);
  r.u = v ? 1 : 0;
  return r;
}
Value stringValue(std::string v) {
  Value r = scalar(ValueType::kString);
  r.s = std::move(v);
  return r;
}

Value arrayValue(ValueType elementType, std::vector<Value> elements) {
  Value r = scalar(ValueType::kArray);
  r.elementType = elementType;
  r.array = std::move(elements);
  return r;
}

Value stringArrayValue(std::span<const std::string> v) {
  std::vector<Value> e;
  e.reserve(v.size());
  for (const std::string& s : v) e.push_back(stringValue(s));
  return arrayValue(ValueType::kString, std::move(e));
}

Value int32ArrayValue(std::span<const int32_t> v) {
  std::vector<Value> e;
  e.reserve(v.size());
  for (int32_t x : v) e.push_back(int32Value(x));
  return arrayValue(ValueType::kInt32, std::move(e));
}

Value float32ArrayValue(std::span<const float> v) {
  std::vector<Value> e;
  e.reserve(v.size());
  for (float x : v) e.push_back(float32Value(x));
  return arrayValue(ValueType::kFloat32, std::move(e));
}

void GgufWriter::set(std::string key, Value value) {
  for (KeyValue& kv : m_kv) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  m_kv.push_back(KeyValue{std::move(key), std::move(value)});
}

Expected<uint64_t> GgufWriter::checkTensor(const std::string& name,
                                           const std::vector<uint64_t>& shape,
                                           TensorType type) const {
  for (const Tensor& t : m_tensors) {
    if (t.name == name) return invalid(fmt::format("tensor '{}' is added twice", name));
  }
  const std::optional<TypeTraits> tt = typeTraits(static_cast<uint32_t>(type));
  if (!tt)
    return invalid(fmt::format("tensor '{}': unknown type {}", name, static_cast<uint32_t>(type)));
  if (shape.empty() || shape.size() > format::kMaxDims) {
    return invalid(fmt::format("tensor '{}': {} dimensions (GGUF allows 1 to {})", name,
                               shape.size(), format::kMaxDims));
  }
  uint64_t elements = 1;
  for (uint64_t dim : shape) {
    if (dim != 0 && elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / dim)
      return invalid(fmt::format("tensor '{}': shape has 2^63 or more elements", name));
    elements *= dim;
  }
  const std::optional<uint64_t> bytes = byteSize(type, elements);
  if (shape[0] % tt->blockElements != 0 || !bytes) {
    return invalid(fmt::format("tensor '{}': {} {} values in rows of {} are not whole blocks", name,
                               elements, tt->name, shape[0]));
  }
  return *bytes;
}

Status GgufWriter::addTensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                             std::vector<uint8_t> data) {
  KVS_ASSIGN_OR_RETURN(const uint64_t bytes, checkTensor(name, shape, type));
  if (bytes != data.size()) {
    return invalid(fmt::format("tensor '{}': {} bytes given for {} of {} {}", name, data.size(),
                               bytes, typeTraits(static_cast<uint32_t>(type))->name,
                               fmt::join(shape, "x")));
  }
  m_tensors.push_back(Tensor{std::move(name), std::move(shape), type, bytes, std::move(data), {}});
  return okStatus();
}

Status GgufWriter::addLazyTensor(std::string name, std::vector<uint64_t> shape, TensorType type,
                                 MakeBytes make) {
  KVS_ASSIGN_OR_RETURN(const uint64_t bytes, checkTensor(name, shape, type));
  m_tensors.push_back(Tensor{std::move(name), std::move(shape), type, bytes, {}, std::move(make)});
  return okStatus();
}

Status GgufWriter::addQuantizedTensor(std::string name, std::vector<uint64_t> shape,
                                      TensorType type, std::span<const float> values) {
  auto data = quantize(type, values);
  if (!data.ok()) {
    Error e = data.takeError();
    e.message = fmt::format("tensor '{}': {}", name, e.message);
    return e;
  }
  return addTensor(std::move(name), std::move(shape), type, std::move(*data));
}

Status GgufWriter::write(const std::function<Status(std::span<const uint8_t>)>& out) const {
  if (m_version < format::kMinVersion || m_version > format::kMaxVersion) {
    return invalid(fmt::format("cannot write GGUF version {} (only {} and {})", m_version,
                               format::kMinVersion, format::kMaxVersion));
  }
  for (const KeyValue& kv : m_kv) {
    if (Status s = validate(kv.value, 0); !s.ok())
      return invalid(fmt::format("metadata key '{}': {}", kv.key, s.error().message));
  }
  KVS_ASSIGN_OR_RETURN(const uint64_t alignment, alignmentOf(m_kv));

  std::vector<uint8_t> header;
  Sink sink(header);
  sink.put(format::kMagic);
  sink.put(m_version);
  sink.put<uint64_t>(m_tensors.size());
  sink.put<uint64_t>(m_kv.size());
  for (const KeyValue& kv : m_kv) {
    sink.putString(kv.key);
    sink.put(static_cast<uint32_t>(kv.value.type));
    sink.putValue(kv.value);
  }
  uint64_t offset = 0;
  for (const Tensor& t : m_tensors) {
    sink.putString(t.name);
    sink.put(static_cast<uint32_t>(t.shape.size()));
    for (uint64_t dim : t.shape) sink.put(dim);
    sink.put(static_cast<uint32_t>(t.type));
    sink.put(offset);
    offset += (t.bytes + alignment - 1) / alignment * alignment;
  }
  sink.padTo(alignment);
  KVS_TRY(out(header));
  const std::vector<uint8_t> padding(alignment, 0);
  for (const Tensor& t : m_tensors) {
    if (t.make) {
      KVS_ASSIGN_OR_RETURN(const std::vector<uint8_t> made, t.make());
      if (made.size() != t.bytes) {
        return invalid(
            fmt::format("tensor '{}': {} bytes made for {}", t.name, made.size(), t.bytes));
      }
      KVS_TRY(out(made));
    } else {
      KVS_TRY(out(t.data));
    }
    const uint64_t pad = (alignment - t.bytes % alignment) % alignment;
    KVS_TRY(out(std::span(padding).first(pad)));
  }
  return okStatus();
}

Expected<std::vector<uint8_t>> GgufWriter::toBytes() const {
  std::vector<uint8_t> image;
  KVS_TRY(write([&](std::span<const uint8_t> piece) {
    image.insert(image.end(), piece.begin(), piece.end());
    return okStatus();
  }));
  return image;
}

Status GgufWriter::writeFile(const std::filesystem::path& path) const {
  KVS_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  KVS_TRY(write([&](std::span<const uint8_t> piece) { return file.write(piece); }));
  return file.commit();
}

}  // namespace kvscope::gguf
