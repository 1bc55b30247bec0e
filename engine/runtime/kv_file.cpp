#include "runtime/kv_file.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checksum.h"
#include "core/json_depth.h"
#include "kv/kv_cache.h"
#include "runtime/auto_plan_json.h"

namespace kvscope::runtime {
namespace {

constexpr char kMagic[8] = {'K', 'V', 'S', 'C', 'O', 'P', 'E', '\0'};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kEntryBytes = 24;
constexpr uint32_t kSectionCount = 3;
constexpr size_t kCrcAt = 24;  // headerCrc's offset in the header
// Bounds a file must respect before anything is sized from it.
constexpr uint32_t kMaxLayers = 4096, kMaxHeads = 1024, kMaxVocab = 1u << 24;

constexpr uint32_t tag(const char (&s)[5]) {
  return uint32_t(uint8_t(s[0])) | uint32_t(uint8_t(s[1])) << 8 | uint32_t(uint8_t(s[2])) << 16 |
         uint32_t(uint8_t(s[3])) << 24;
}
constexpr uint32_t kMeta = tag("META"), kTokens = tag("TOKN"), kRows = tag("ROWS");

struct Section {
  uint32_t tag = 0, crc = 0;
  uint64_t offset = 0, bytes = 0;
};

template <typename T>
void put(std::vector<uint8_t>& out, size_t at, T v) {
  std::memcpy(out.data() + at, &v, sizeof v);
}
template <typename T>
T get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::span<const uint8_t> bytesOf(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::string hex(uint64_t v) {
  return fmt::format("{:016x}", v);
}

Expected<uint64_t> parseHex(const nlohmann::json& j, const char* what) {
  const std::string s = j.get<std::string>();
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (s.size() != 16 || ec != std::errc() || end != s.data() + s.size())
    return makeError(ErrorCode::kBadFile, "the saved KV cache's {} is malformed", what);
  return v;
}

const char* autoStateName(AutoState s) {
  switch (s) {
    case AutoState::kPending:
      return "pending";
    case AutoState::kSettled:
      return "settled";
    case AutoState::kFailed:
      return "failed";
    case AutoState::kNone:
      break;
  }
  return "none";
}

nlohmann::json metaJson(const KvFileInfo& info, const kv::KvLayout& layout) {
  nlohmann::json schemes = nlohmann::json::array(), rowBytes = nlohmann::json::array();
  nlohmann::json windowLayers = nlohmann::json::array();
  nlohmann::json shapes = nlohmann::json::array();
  for (const kv::KvLayerShape& l : info.layerShapes) shapes.push_back({l.nHeadKv, l.headDim});
  for (uint32_t l = 0; l < layout.geometry().nLayer(); ++l) {
    if (layout.isWindow(l)) windowLayers.push_back(l);
    schemes.push_back({info.schemes[l].key, info.schemes[l].value});
    rowBytes.push_back(
        {layout.rowBytes(l, kv::KvPart::kKey), layout.rowBytes(l, kv::KvPart::kValue)});
  }
  nlohmann::json policy = {{"text", info.policy}, {"auto", autoStateName(info.autoState)}};
  if (info.autoPlan) policy["auto_plan"] = autoPlanJson(*info.autoPlan);
  if (!info.autoFailure.empty()) policy["auto_failure"] = info.autoFailure;
  nlohmann::json meta = {{"format", "kvscope-kv-cache"},
                         {"producer", {{"app", "kvscope"}, {"backend", info.backend}}},
                         {"model",
                          {{"architecture", info.architecture},
                           {"name", info.modelName},
                           {"fingerprint", hex(info.fingerprint)},
                           {"layers", info.nLayer},
                           {"layer_shapes", shapes},
                           {"vocab", info.nVocab}}},
                         {"cache",
                          {{"seed", hex(info.cacheSeed)},
                           {"rows", info.tokens.size()},
                           {"schemes", schemes},
                           {"row_bytes", rowBytes},
                           {"window", layout.geometry().window},
                           {"window_layers", windowLayers}}},
                         {"policy", policy}};
  if (info.tailHeld > 0)
    meta["cache"]["tail"] = {{"held", info.tailHeld}, {"bytes", info.tailBytes}};
  return meta;
}

Error bad(std::string_view what) {
  return makeError(ErrorCode::kBadFile, "the saved KV cache is damaged: {}", what);
}

// An unsigned integer (never a float or a negative number) in [lo, hi];
// throws otherwise (the caller turns that into kBadFile).
uint32_t unsignedIn(const nlohmann::json& v, const char* what, uint32_t lo, uint32_t hi) {
  if (!v.is_number_unsigned())
    throw std::out_of_range(fmt::format("{} is not an unsigned integer", what));
  const auto x = v.get<uint64_t>();
  if (x < lo || x > hi)
    throw std::out_of_range(fmt::format("{} is {}, expected {} to {}", what, x, lo, hi));
  return static_cast<uint32_t>(x);
}

uint32_t bounded(const nlohmann::json& j, const char* key, uint32_t lo, uint32_t hi) {
  return unsignedIn(j.at(key), key, lo, hi);
}

// META's fields into `info` and the row sizes; throws on a missing or
// mistyped field (the caller turns that into kBadFile).
Status parseMeta(const nlohmann::json& meta, KvFileInfo& info,
                 std::vector<std::vector<uint32_t>>& rowBytes, uint32_t& window,
                 std::vector<bool>& windowLayers, uint32_t& rows) {
  if (meta.at("format").get<std::string>() != "kvscope-kv-cache") return bad("not a KV cache");
  info.backend = meta.at("producer").at("backend").get<std::string>();
  const nlohmann::json& model = meta.at("model");
  info.architecture = model.at("architecture").get<std::string>();
  info.modelName = model.at("name").get<std::string>();
  KVS_ASSIGN_OR_RETURN(info.fingerprint, parseHex(model.at("fingerprint"), "model fingerprint"));
  info.nLayer = bounded(model, "layers", 1, kMaxLayers);
  const nlohmann::json& shapes = model.at("layer_shapes");
  if (!shapes.is_array() || shapes.size() != info.nLayer)
    return bad("the layer shapes do not cover every layer");
  for (const nlohmann::json& shape : shapes) {
    if (!shape.is_array() || shape.size() != 2) return bad("a layer's shape is malformed");
    info.layerShapes.push_back({unsignedIn(shape[0], "kv heads", 1, kMaxHeads),
                                unsignedIn(shape[1], "head_dim", 1, kv::kMaxKvDim)});
  }
  info.nVocab = bounded(model, "vocab", 1, kMaxVocab);
  const nlohmann::json& cache = meta.at("cache");
  KVS_ASSIGN_OR_RETURN(info.cacheSeed, parseHex(cache.at("seed"), "cache seed"));
  rows = bounded(cache, "rows", 0, kMaxKvFileRows);
  const nlohmann::json& schemes = cache.at("schemes");
  const nlohmann::json& sizes = cache.at("row_bytes");
  if (!schemes.is_array() || schemes.size() != info.nLayer || !sizes.is_array() ||
      sizes.size() != info.nLayer) {
    return bad("the schemes do not name every layer");
  }
  for (uint32_t l = 0; l < info.nLayer; ++l) {
    const nlohmann::json& s = schemes[l];
    const nlohmann::json& b = sizes[l];
    if (!s.is_array() || s.size() != 2 || !b.is_array() || b.size() != 2)
      return bad("a layer's schemes are malformed");
    kv::LayerSchemes layer{s[0].get<std::string>(), s[1].get<std::string>()};
    if (!kv::isSchemeName(layer.key) || !kv::isSchemeName(layer.value))
      return makeError(ErrorCode::kBadFile, "the saved KV cache uses an unknown KV scheme");
    info.schemes.push_back(std::move(layer));
    rowBytes.push_back({unsignedIn(b[0], "a row size", 1, 8 * kv::kMaxKvDim),
                        unsignedIn(b[1], "a row size", 1, 8 * kv::kMaxKvDim)});
  }
  window = bounded(cache, "window", 0, kMaxKvFileRows);
  if (window == 1) return bad("a sliding window of one row");
  windowLayers.assign(window > 0 ? info.nLayer : 0, false);
  const nlohmann::json& windowed = cache.at("window_layers");
  if (!windowed.is_array() || (window == 0 && !windowed.empty()))
    return bad("the window layers are malformed");
  for (const nlohmann::json& l : windowed) {
    const uint32_t layer = unsignedIn(l, "a window layer", 0, info.nLayer - 1);
    if (windowLayers[layer]) return bad("a window layer named twice");
    windowLayers[layer] = true;
  }
  if (cache.contains("tail")) {
    const nlohmann::json& tail = cache.at("tail");
    info.tailHeld = bounded(tail, "held", 1, std::min(rows, kv::kMaxTailRows));
    // At most f16 K and V rows of every layer: the exact size is checked
    // against the cache it restores (kv::KvCache::tailBytes).
    uint64_t most = 0;
    for (const kv::KvLayerShape& l : info.layerShapes)
      most += uint64_t{l.nHeadKv} * 2 * 2 * l.headDim;
    if (!tail.at("bytes").is_number_unsigned() ||
        tail.at("bytes").get<uint64_t>() > most * info.tailHeld)
      return bad("the precision tail's size");
    info.tailBytes = tail.at("bytes").get<uint64_t>();
  }
  const nlohmann::json& policy = meta.at("policy");
  info.policy = policy.at("text").get<std::string>();
  const std::string state = policy.at("auto").get<std::string>();
  if (state == "none") {
    info.autoState = AutoState::kNone;
  } else if (state == "pending") {
    info.autoState = AutoState::kPending;
  } else if (state == "settled") {
    info.autoState = AutoState::kSettled;
    KVS_ASSIGN_OR_RETURN(info.autoPlan, parseAutoPlanJson(policy.at("auto_plan")));
    if (info.autoPlan->layers.size() != info.nLayer) return bad("the auto plan's layers");
  } else if (state == "failed") {
    info.autoState = AutoState::kFailed;
    info.autoFailure = policy.at("auto_failure").get<std::string>();
  } else {
    return bad("unknown auto state");
  }
  return okStatus();
}

}  // namespace

Status writeKvFile(
    const std::filesystem::path& path, const KvFileInfo& info, const kv::KvLayout& layout,
    const std::function<Status(const std::function<Status(std::span<const uint8_t>)>&)>&
        exportRows) {
  const std::string meta = metaJson(info, layout).dump();
  std::vector<uint8_t> tokens(info.tokens.size() * sizeof(int32_t));
  if (!tokens.empty()) std::memcpy(tokens.data(), info.tokens.data(), tokens.size());

  KVS_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::create(path));
  const size_t tableEnd = kHeaderBytes + kSectionCount * kEntryBytes;
  std::vector<uint8_t> head(tableEnd, 0);
  KVS_TRY(file.write(head));
  KVS_TRY(file.write(bytesOf(meta)));
  KVS_TRY(file.write(tokens));
  uint64_t rowBytes = 0;
  uint32_t rowsCrc = 0;
  const auto writeRun = [&](std::span<const uint8_t> run) -> Status {
    KVS_TRY(file.write(run));
    rowsCrc = crc32c(run, rowsCrc);
    rowBytes += run.size();
    return okStatus();
  };
  KVS_TRY(exportRows(writeRun));
  const uint64_t expected =
      layout.canonicalBytes(static_cast<uint32_t>(info.tokens.size())) + info.tailBytes;
  if (rowBytes != expected) {
    return makeError(ErrorCode::kInternal, "the backend exported {} bytes of rows, not {}",
                     rowBytes, expected);
  }

  const Section sections[kSectionCount] = {
      {kMeta, crc32c(bytesOf(meta)), tableEnd, meta.size()},
      {kTokens, crc32c(tokens), tableEnd + meta.size(), tokens.size()},
      {kRows, rowsCrc, tableEnd + meta.size() + tokens.size(), rowBytes}};
  std::memcpy(head.data(), kMagic, sizeof kMagic);
  put<uint16_t>(head, 8, kKvFileMajor);
  put<uint16_t>(head, 10, kKvFileMinor);
  put<uint32_t>(head, 12, kSectionCount);
  put<uint64_t>(head, 16, sections[2].offset + sections[2].bytes);
  for (uint32_t i = 0; i < kSectionCount; ++i) {
    const size_t at = kHeaderBytes + i * kEntryBytes;
    put<uint32_t>(head, at, sections[i].tag);
    put<uint32_t>(head, at + 4, sections[i].crc);
    put<uint64_t>(head, at + 8, sections[i].offset);
    put<uint64_t>(head, at + 16, sections[i].bytes);
  }
  put<uint32_t>(head, kCrcAt, crc32c(head));
  KVS_TRY(file.writeAt(0, head));
  return file.commit();
}

Expected<KvFileReader> KvFileReader::open(const std::filesystem::path& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return makeError(ErrorCode::kIo, "cannot read {}: {}", path.string(), ec.message());
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) return makeError(ErrorCode::kIo, "cannot read {}", path.string());
  return read(std::move(in), size);
}

Expected<KvFileReader> KvFileReader::parse(std::string bytes) {
  const uint64_t size = bytes.size();
  return read(std::make_unique<std::istringstream>(std::move(bytes)), size);
}

Expected<KvFileReader> KvFileReader::read(std::unique_ptr<std::istream> in, uint64_t size) {
  const size_t tableEnd = kHeaderBytes + kSectionCount * kEntryBytes;
  if (size < tableEnd) return bad("it is shorter than its header");
  std::vector<uint8_t> head(tableEnd);
  if (!in->read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size())))
    return makeError(ErrorCode::kIo, "cannot read the saved KV cache");
  if (std::memcmp(head.data(), kMagic, sizeof kMagic) != 0)
    return makeError(ErrorCode::kBadFile, "not a saved kvscope KV cache (bad magic)");
  const auto major = get<uint16_t>(&head[8]);
  if (major < kKvFileMajor) {
    return makeError(ErrorCode::kBadFile,
                     "the saved KV cache was written by an older kvscope (format {}; this build "
                     "reads format {}, which stores each layer's attention shape): run the "
                     "conversation again to rebuild it",
                     major, kKvFileMajor);
  }
  if (major != kKvFileMajor) {
    return makeError(ErrorCode::kBadFile,
                     "the saved KV cache has format {}, newer than this build's format {}", major,
                     kKvFileMajor);
  }
  if (get<uint32_t>(&head[12]) != kSectionCount) return bad("unexpected section count");
  if (get<uint64_t>(&head[16]) != size) return bad("it is truncated or has trailing bytes");
  const uint32_t headerCrc = get<uint32_t>(&head[kCrcAt]);
  put<uint32_t>(head, kCrcAt, 0);
  if (crc32c(head) != headerCrc) return bad("the header's checksum does not match");
  Section s[kSectionCount];
  uint64_t next = tableEnd;
  const uint32_t tags[kSectionCount] = {kMeta, kTokens, kRows};
  for (uint32_t i = 0; i < kSectionCount; ++i) {
    const uint8_t* e = &head[kHeaderBytes + i * kEntryBytes];
    s[i] = {get<uint32_t>(e), get<uint32_t>(e + 4), get<uint64_t>(e + 8), get<uint64_t>(e + 16)};
    // Back to back, in order, inside the file (subtraction: no overflow).
    if (s[i].tag != tags[i] || s[i].offset != next || s[i].bytes > size - s[i].offset)
      return bad("the section table");
    next = s[i].offset + s[i].bytes;
  }
  if (next != size) return bad("the sections do not cover the file");
  if (s[0].bytes > kMaxMetaBytes) return bad("the metadata is too large");

  KvFileReader r;
  std::string meta(s[0].bytes, '\0');
  if (!in->read(meta.data(), static_cast<std::streamsize>(meta.size())))
    return makeError(ErrorCode::kIo, "cannot read the saved KV cache");
  if (crc32c(bytesOf(meta)) != s[0].crc) return bad("the metadata's checksum does not match");
  if (jsonNestingDepth(meta) > kMaxJsonDepth) return bad("the metadata nests too deeply");
  uint32_t rows = 0;
  try {
    KVS_TRY(parseMeta(nlohmann::json::parse(meta), r.m_info, r.m_rowBytes, r.m_window,
                      r.m_windowLayers, rows));
  } catch (const std::exception& e) {
    return makeError(ErrorCode::kBadFile, "the saved KV cache's metadata is malformed: {}",
                     e.what());
  }
  const bool mixedLayer =
      std::any_of(r.m_info.schemes.begin(), r.m_info.schemes.end(),
                  [](const kv::LayerSchemes& l) { return (l.key == "f16") != (l.value == "f16"); });
  if (get<uint16_t>(&head[10]) < 2 && r.m_info.tailHeld > 0 && mixedLayer) {
    return makeError(ErrorCode::kBadFile,
                     "the saved KV cache was written by an older kvscope (format 4.{}), whose "
                     "precision tail kept no copy of a layer's f16 part: run the conversation "
                     "again to rebuild it",
                     get<uint16_t>(&head[10]));
  }
  if (s[1].bytes != uint64_t{rows} * sizeof(int32_t)) return bad("the token count");
  r.m_info.tokens.resize(rows);
  if (!in->read(reinterpret_cast<char*>(r.m_info.tokens.data()),
                static_cast<std::streamsize>(s[1].bytes))) {
    return makeError(ErrorCode::kIo, "cannot read the saved KV cache");
  }
  if (crc32c({reinterpret_cast<const uint8_t*>(r.m_info.tokens.data()), s[1].bytes}) != s[1].crc)
    return bad("the tokens' checksum does not match");
  for (int32_t t : r.m_info.tokens) {
    if (t < 0 || static_cast<uint32_t>(t) >= r.m_info.nVocab)
      return bad("a token outside the vocabulary");
  }
  // The canonical order's bytes (kv::KvLayout::canonicalBytes): a window
  // layer holds its last window - 1 rows. Row sizes are bounded above, so
  // this sum cannot overflow.
  uint64_t rowsBytes = 0;
  for (uint32_t l = 0; l < r.m_rowBytes.size(); ++l) {
    const bool window = r.m_window > 0 && r.m_windowLayers[l];
    const uint64_t kept = window ? std::min(rows, r.m_window - 1) : rows;
    rowsBytes += kept * r.m_info.layerShapes[l].nHeadKv * (r.m_rowBytes[l][0] + r.m_rowBytes[l][1]);
  }
  if (s[2].bytes != rowsBytes + r.m_info.tailBytes) return bad("the rows' size");
  r.m_in = std::move(in);
  r.m_rowsOffset = s[2].offset;
  r.m_rowsBytes = s[2].bytes;
  r.m_rowsLeft = s[2].bytes;
  r.m_rowsCrc = s[2].crc;
  return r;
}

Status KvFileReader::checkRowSizes(const kv::KvLayout& layout) const {
  if (layout.geometry().nLayer() != m_rowBytes.size())
    return makeError(ErrorCode::kInternal, "a layout of another model");
  if (layout.geometry().window != m_window || layout.geometry().windowLayers != m_windowLayers) {
    return makeError(ErrorCode::kBadFile,
                     "the saved KV cache's sliding-window layers differ from this model's");
  }
  for (uint32_t l = 0; l < layout.geometry().nLayer(); ++l) {
    if (layout.rowBytes(l, kv::KvPart::kKey) != m_rowBytes[l][0] ||
        layout.rowBytes(l, kv::KvPart::kValue) != m_rowBytes[l][1]) {
      return makeError(ErrorCode::kBadFile,
                       "the saved KV cache stores layer {} in rows of another size than this "
                       "build's schemes",
                       l);
    }
  }
  return okStatus();
}

Status KvFileReader::verifyRows() {
  if (m_rowsLeft != m_rowsBytes) return makeError(ErrorCode::kInternal, "rows already read");
  std::vector<uint8_t> chunk(std::min<uint64_t>(m_rowsBytes, 1 << 20));
  uint32_t crc = 0;
  for (uint64_t left = m_rowsBytes; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
    if (!m_in->read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(n)))
      return makeError(ErrorCode::kIo, "cannot read the saved KV cache's rows");
    crc = crc32c({chunk.data(), n}, crc);
    left -= n;
  }
  if (crc != m_rowsCrc) return bad("the rows' checksum does not match");
  m_in->clear();
  if (!m_in->seekg(static_cast<std::streamoff>(m_rowsOffset)))
    return makeError(ErrorCode::kIo, "cannot read the saved KV cache's rows");
  return okStatus();
}

Status KvFileReader::readRows(std::span<uint8_t> out) {
  if (out.size() > m_rowsLeft) return bad("more rows were asked for than it holds");
  if (!m_in->read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size())))
    return makeError(ErrorCode::kIo, "cannot read the saved KV cache's rows");
  m_rowsCrcSoFar = crc32c(out, m_rowsCrcSoFar);
  m_rowsLeft -= out.size();
  if (m_rowsLeft == 0 && m_rowsCrcSoFar != m_rowsCrc)
    return bad("the rows' checksum does not match");
  return okStatus();
}

Status KvFileReader::finishRows() const {
  if (m_rowsLeft != 0) return bad("its rows are longer than the cache they restore");
  return okStatus();
}

}  // namespace kvscope::runtime
