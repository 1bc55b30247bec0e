// Opening (mmap or copy), lookups and typed getters of GgufFile. Parsing and
// validation live in gguf_parse.cpp.
#include "gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

namespace kvscope::gguf {
namespace {

constexpr uint64_t kInt64Max = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

bool isUnsigned(ValueType t) {
  return t == ValueType::kUint8 || t == ValueType::kUint16 || t == ValueType::kUint32 ||
         t == ValueType::kUint64;
}
bool isSigned(ValueType t) {
  return t == ValueType::kInt8 || t == ValueType::kInt16 || t == ValueType::kInt32 ||
         t == ValueType::kInt64;
}
bool isFloat(ValueType t) {
  return t == ValueType::kFloat32 || t == ValueType::kFloat64;
}

std::optional<uint64_t> asUint(const Value& v) {
  if (isUnsigned(v.type)) return v.u;
  if (isSigned(v.type) && v.i >= 0) return static_cast<uint64_t>(v.i);
  return std::nullopt;
}

std::optional<int64_t> asInt(const Value& v) {
  if (isSigned(v.type)) return v.i;
  if (isUnsigned(v.type) && v.u <= kInt64Max) return static_cast<int64_t>(v.u);
  return std::nullopt;
}

std::optional<double> asFloat(const Value& v) {
  if (isFloat(v.type)) return v.f;
  if (isUnsigned(v.type)) return static_cast<double>(v.u);
  if (isSigned(v.type)) return static_cast<double>(v.i);
  return std::nullopt;
}

// Converts every element of an array value with `convert`; nullopt when the
// value is not an array or any element does not convert.
template <typename T, typename Convert>
std::optional<std::vector<T>> convertArray(const Value* v, Convert convert) {
  if (!v || v->type != ValueType::kArray) return std::nullopt;
  std::vector<T> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) {
    auto c = convert(e);
    if (!c) return std::nullopt;
    out.push_back(static_cast<T>(*c));
  }
  return out;
}

Error osError(const std::filesystem::path& path, const char* action, int err) {
  const ErrorCode code = err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo;
  return makeError(code, "cannot {} {}: {}", action, path.string(), std::strerror(err));
}

}  // namespace

const char* valueTypeName(ValueType type) {
  switch (type) {
    case ValueType::kUint8:
      return "uint8";
    case ValueType::kInt8:
      return "int8";
    case ValueType::kUint16:
      return "uint16";
    case ValueType::kInt16:
      return "int16";
    case ValueType::kUint32:
      return "uint32";
    case ValueType::kInt32:
      return "int32";
    case ValueType::kFloat32:
      return "float32";
    case ValueType::kBool:
      return "bool";
    case ValueType::kString:
      return "string";
    case ValueType::kArray:
      return "array";
    case ValueType::kUint64:
      return "uint64";
    case ValueType::kInt64:
      return "int64";
    case ValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

Expected<std::unique_ptr<GgufFile>> GgufFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return osError(path, "open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return osError(path, "stat", err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError(ErrorCode::kIo, "cannot open {}: not a regular file", path.string());
  }
  if (st.st_size == 0) {
    ::close(fd);
    return makeError(ErrorCode::kBadFile, "{}: the file is empty, not a GGUF model", path.string());
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mapErr = errno;
  ::close(fd);  // the mapping keeps the file open
  if (map == MAP_FAILED) return osError(path, "map", mapErr);

  std::unique_ptr<GgufFile> file(new GgufFile());
  file->m_path = path;
  file->m_base = static_cast<const uint8_t*>(map);
  file->m_size = size;
  file->m_mapped = true;
  if (Status s = file->parse(); !s.ok()) {
    Error e = s.takeError();
    e.message = fmt::format("{}: {}", path.string(), e.message);
    return e;
  }
  return file;
}

Expected<std::unique_ptr<GgufFile>> GgufFile::fromBytes(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return makeError(ErrorCode::kBadFile, "the image is empty, not a GGUF model");
  std::unique_ptr<GgufFile> file(new GgufFile());
  file->m_owned.assign(bytes.begin(), bytes.end());
  file->m_base = file->m_owned.data();
  file->m_size = file->m_owned.size();
  KVS_TRY(file->parse());
  return file;
}

GgufFile::~GgufFile() {
  if (m_mapped) ::munmap(const_cast<uint8_t*>(m_base), m_size);
}

const Value* GgufFile::find(std::string_view key) const {
  const auto it = m_kvIndex.find(key);
  return it == m_kvIndex.end() ? nullptr : &m_kv[it->second].value;
}

const TensorInfo* GgufFile::findTensor(std::string_view name) const {
  const auto it = m_tensorIndex.find(name);
  return it == m_tensorIndex.end() ? nullptr : &m_tensors[it->second];
}

std::span<const uint8_t> GgufFile::tensorData(const TensorInfo& tensor) const {
  // Tensors of this file were validated at parse time; the check keeps a
  // TensorInfo from elsewhere from reaching outside the mapping.
  const uint64_t dataSize = m_size > m_dataOffset ? m_size - m_dataOffset : 0;
  if (tensor.bytes == 0 || tensor.offset > dataSize || tensor.bytes > dataSize - tensor.offset)
    return {};
  return {m_base + m_dataOffset + tensor.offset, static_cast<size_t>(tensor.bytes)};
}

std::optional<std::string_view> GgufFile::getString(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::kString) return std::nullopt;
  return std::string_view(v->s);
}

std::optional<uint64_t> GgufFile::getUint(std::string_view key) const {
  const Value* v = find(key);
  return v ? asUint(*v) : std::nullopt;
}

std::optional<int64_t> GgufFile::getInt(std::string_view key) const {
  const Value* v = find(key);
  return v ? asInt(*v) : std::nullopt;
}

std::optional<double> GgufFile::getFloat(std::string_view key) const {
  const Value* v = find(key);
  return v ? asFloat(*v) : std::nullopt;
}

std::optional<bool> GgufFile::getBool(std::string_view key) const {
  const Value* v = find(key);
  if (!v || v->type != ValueType::kBool) return std::nullopt;
  return v->u != 0;
}

std::optional<std::vector<std::string>> GgufFile::getStringArray(std::string_view key) const {
  return convertArray<std::string>(find(key), [](const Value& e) -> std::optional<std::string> {
    if (e.type != ValueType::kString) return std::nullopt;
    return e.s;
  });
}

std::optional<std::vector<int64_t>> GgufFile::getIntArray(std::string_view key) const {
  return convertArray<int64_t>(find(key), asInt);
}

std::optional<std::vector<float>> GgufFile::getFloatArray(std::string_view key) const {
  return convertArray<float>(find(key), asFloat);
}

}  // namespace kvscope::gguf
