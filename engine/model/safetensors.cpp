#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/json_depth.h"

namespace kvscope::model {
namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // the format's own limit

struct Dtype {
  const char* name;
  gguf::TensorType type;
  uint32_t bytes;
};
constexpr Dtype kDtypes[] = {
    {"F32", gguf::TensorType::kF32, 4},
    {"F16", gguf::TensorType::kF16, 2},
    {"BF16", gguf::TensorType::kBF16, 2},
    {"I8", gguf::TensorType::kI8, 1},
    {"I16", gguf::TensorType::kI16, 2},
    {"I32", gguf::TensorType::kI32, 4},
    {"I64", gguf::TensorType::kI64, 8},
    {"F64", gguf::TensorType::kF64, 8},
    // Raw bytes (gpt-oss's MXFP4 blocks and exponents), read only by
    // model/hf_experts.cpp: held as I8, a type no weight role decodes.
    {"U8", gguf::TensorType::kI8, 1},
};

}  // namespace

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(
    const std::filesystem::path& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  KVS_TRY(f->parse(path));
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (m_base) ::munmap(const_cast<uint8_t*>(m_base), m_size);
}

Status SafetensorsFile::parse(const std::filesystem::path& path) {
  const std::string p = path.string();
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return makeError(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo, "cannot open {}: {}",
                     p, std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 8) {
    ::close(fd);
    return makeError(ErrorCode::kBadFile, "{} is too small to be a safetensors file", p);
  }
  m_size = static_cast<uint64_t>(st.st_size);
  void* map = ::mmap(nullptr, m_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED)
    return makeError(ErrorCode::kIo, "cannot map {}: {}", p, std::strerror(errno));
  m_base = static_cast<const uint8_t*>(map);

  uint64_t headerLen = 0;
  std::memcpy(&headerLen, m_base, 8);  // little-endian hosts only (x86-64, arm64)
  if (headerLen > kMaxHeader || headerLen > m_size - 8) {
    return makeError(ErrorCode::kBadFile, "{}: header length {} exceeds the file", p, headerLen);
  }
  const std::string_view headerText(reinterpret_cast<const char*>(m_base + 8), headerLen);
  if (jsonNestingDepth(headerText) > kMaxJsonDepth)
    return makeError(ErrorCode::kBadFile, "{}: header nests deeper than {} levels", p,
                     kMaxJsonDepth);
  auto header = nlohmann::json::parse(headerText, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return makeError(ErrorCode::kBadFile, "{}: header is not JSON", p);
  const uint8_t* data = m_base + 8 + headerLen;
  const uint64_t dataSize = m_size - 8 - headerLen;

  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (v.is_object())
        for (auto& [k, val] : v.items())
          if (val.is_string()) m_metadata.emplace_back(k, val.get<std::string>());
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() || !v.contains("shape") ||
        !v["shape"].is_array() || !v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2) {
      return makeError(ErrorCode::kBadFile, "{}: tensor '{}' has a malformed header entry", p,
                       name);
    }
    const std::string dtype = v["dtype"].get<std::string>();
    const Dtype* dt = nullptr;
    for (const auto& d : kDtypes)
      if (dtype == d.name) dt = &d;
    if (!dt)
      return makeError(ErrorCode::kUnsupported, "{}: tensor '{}' has unsupported dtype {}", p, name,
                       dtype);
    SafetensorsEntry e{name, dt->type, {}, nullptr, 0};
    uint64_t count = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40)) {
        return makeError(ErrorCode::kBadFile, "{}: tensor '{}' has an invalid shape", p, name);
      }
      e.shape.push_back(d.get<uint64_t>());
      if (e.shape.back() != 0 && count > (1ull << 50) / e.shape.back()) {
        return makeError(ErrorCode::kBadFile, "{}: tensor '{}' is impossibly large", p, name);
      }
      count *= e.shape.back();
    }
    const auto& offs = v["data_offsets"];
    if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) {
      return makeError(ErrorCode::kBadFile, "{}: tensor '{}' has invalid data offsets", p, name);
    }
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    if (begin > end || end > dataSize || end - begin != count * dt->bytes) {
      return makeError(ErrorCode::kBadFile,
                       "{}: tensor '{}' data [{}, {}) does not fit the file or its shape", p, name,
                       begin, end);
    }
    e.data = data + begin;
    e.bytes = end - begin;
    m_tensors.push_back(std::move(e));
  }
  return okStatus();
}

}  // namespace kvscope::model
