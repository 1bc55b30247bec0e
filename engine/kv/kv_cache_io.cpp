// KvCache::save / KvCache::load: the saved form documented in kv_cache.h.

#include <cstring>
#include <istream>
#include <ostream>

#include "kv/kv_cache.h"

namespace kvscope::kv {
namespace {

constexpr char kMagic[4] = {'K', 'V', 'S', 'C'};
constexpr uint32_t kVersion = 1;
// Bounds a loaded header must respect before anything is allocated.
constexpr uint32_t kMaxLayers = 4096, kMaxHeads = 1024, kMaxRowsPerPage = 1 << 16;
constexpr uint32_t kMaxRows = 1 << 24;

template <typename T>
void put(std::ostream& out, T v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads from a stream that may be truncated or hostile: every field checked.
class Reader {
 public:
  explicit Reader(std::istream& in) : m_in(in) {}

  Status bytes(void* p, size_t n, const char* what) {
    m_in.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (static_cast<size_t>(m_in.gcount()) != n)
      return makeError(ErrorCode::kBadFile, "the saved KV cache is truncated (in {})", what);
    return okStatus();
  }
  template <typename T>
  Expected<T> get(const char* what) {
    T v{};
    KVS_TRY(bytes(&v, sizeof v, what));
    return v;
  }

 private:
  std::istream& m_in;
};

Status checkRange(uint32_t v, uint32_t lo, uint32_t hi, const char* what) {
  if (v < lo || v > hi) {
    return makeError(ErrorCode::kBadFile, "the saved KV cache has {} {} (expected {} to {})", v,
                     what, lo, hi);
  }
  return okStatus();
}

}  // namespace

Status KvCache::save(std::ostream& out) const {
  out.write(kMagic, sizeof kMagic);
  put(out, kVersion);
  put(out, m_geometry.nLayer);
  put(out, m_geometry.nHeadKv);
  put(out, m_geometry.headDim);
  put(out, m_geometry.rowsPerPage);
  put(out, m_cacheSeed);
  for (uint32_t l = 0; l < m_geometry.nLayer; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      const KvScheme& s = scheme(l, p);
      put(out, static_cast<uint8_t>(s.name().size()));
      out.write(s.name().data(), static_cast<std::streamsize>(s.name().size()));
      put(out, s.seed());
    }
  }
  put(out, m_rows);
  for (uint32_t l = 0; l < m_geometry.nLayer; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < m_geometry.nHeadKv; ++h) {
        for (uint32_t r = 0; r < m_rows; ++r) {
          const auto bytes = row(l, p, h, r);
          out.write(reinterpret_cast<const char*>(bytes.data()),
                    static_cast<std::streamsize>(bytes.size()));
        }
      }
    }
  }
  if (!out) return makeError(ErrorCode::kIo, "could not write the KV cache");
  return okStatus();
}

Expected<std::unique_ptr<KvCache>> KvCache::load(std::istream& in) {
  Reader r(in);
  char magic[4];
  KVS_TRY(r.bytes(magic, sizeof magic, "the header"));
  if (std::memcmp(magic, kMagic, sizeof magic) != 0)
    return makeError(ErrorCode::kBadFile, "not a saved kvscope KV cache (bad magic)");
  KVS_ASSIGN_OR_RETURN(const uint32_t version, r.get<uint32_t>("the header"));
  if (version != kVersion) {
    return makeError(ErrorCode::kBadFile,
                     "saved KV cache version {} is not supported (this build reads {})", version,
                     kVersion);
  }
  KvGeometry g;
  KVS_ASSIGN_OR_RETURN(g.nLayer, r.get<uint32_t>("the header"));
  KVS_ASSIGN_OR_RETURN(g.nHeadKv, r.get<uint32_t>("the header"));
  KVS_ASSIGN_OR_RETURN(g.headDim, r.get<uint32_t>("the header"));
  KVS_ASSIGN_OR_RETURN(g.rowsPerPage, r.get<uint32_t>("the header"));
  KVS_TRY(checkRange(g.nLayer, 1, kMaxLayers, "layers"));
  KVS_TRY(checkRange(g.nHeadKv, 1, kMaxHeads, "KV heads"));
  KVS_TRY(checkRange(g.headDim, 1, kMaxKvDim, "values per head"));
  KVS_TRY(checkRange(g.rowsPerPage, 1, kMaxRowsPerPage, "rows per page"));
  KVS_ASSIGN_OR_RETURN(const uint64_t cacheSeed, r.get<uint64_t>("the header"));

  std::vector<LayerSchemes> layers(g.nLayer);
  for (uint32_t l = 0; l < g.nLayer; ++l) {
    for (uint32_t p = 0; p < 2; ++p) {
      KVS_ASSIGN_OR_RETURN(const uint8_t length, r.get<uint8_t>("the scheme names"));
      std::string name(length, '\0');
      KVS_TRY(r.bytes(name.data(), length, "the scheme names"));
      KVS_ASSIGN_OR_RETURN(const uint64_t seed, r.get<uint64_t>("the scheme seeds"));
      if (!isSchemeName(name)) {
        return makeError(ErrorCode::kBadFile, "the saved KV cache uses unknown scheme '{}'", name);
      }
      if (seed != streamSeed(cacheSeed, l, p)) {
        return makeError(ErrorCode::kBadFile,
                         "the saved KV cache's seed of layer {} {} does not match its cache seed",
                         l, p == 0 ? "K" : "V");
      }
      (p == 0 ? layers[l].key : layers[l].value) = std::move(name);
    }
  }
  KVS_ASSIGN_OR_RETURN(const uint32_t rows, r.get<uint32_t>("the row count"));
  KVS_TRY(checkRange(rows, 0, kMaxRows, "rows"));

  auto created = create(g, layers, cacheSeed);
  if (!created) return makeError(ErrorCode::kBadFile, "{}", created.error().message);
  std::unique_ptr<KvCache> cache = std::move(*created);
  // A hostile row count must not allocate before the data is known to be
  // there: when the stream can tell its size, compare first.
  uint64_t rowData = 0;
  for (uint32_t l = 0; l < g.nLayer; ++l)
    rowData += uint64_t{g.nHeadKv} *
               (cache->rowBytes(l, KvPart::kKey) + cache->rowBytes(l, KvPart::kValue));
  const std::streampos here = in.tellg();
  if (here != std::streampos(-1) && in.seekg(0, std::ios::end)) {
    const auto left = static_cast<uint64_t>(in.tellg() - here);
    in.seekg(here);
    if (left < rowData * rows)
      return makeError(ErrorCode::kBadFile, "the saved KV cache is truncated (in the rows)");
  }
  in.clear();
  KVS_TRY(cache->append(rows));
  for (uint32_t l = 0; l < g.nLayer; ++l) {
    for (KvPart p : {KvPart::kKey, KvPart::kValue}) {
      for (uint32_t h = 0; h < g.nHeadKv; ++h) {
        for (uint32_t i = 0; i < rows; ++i) {
          const auto bytes = cache->row(l, p, h, i);
          KVS_TRY(r.bytes(bytes.data(), bytes.size(), "the rows"));
        }
      }
    }
  }
  if (in.peek() != std::char_traits<char>::eof())
    return makeError(ErrorCode::kBadFile, "the saved KV cache has trailing bytes");
  return cache;
}

}  // namespace kvscope::kv
