#pragma once
// The saved KV cache: a session's compressed cache rows and token history in
// one file, the same format for every backend, restored without prefill
// (Session::restoreCache).
//
// Format "KVSCOPE" 4.2, little-endian (older files are refused with a
// message saying so: 2.0 came before sliding windows, 3.0 before per-layer
// attention shapes; 4.1 added the precision tail, which 4.0 files lack; 4.2
// keeps both parts of a layer with a compressed part in the tail, so a 4.1
// file whose tail has a layer with one f16 part is refused):
//   header, 64 bytes:
//     char magic[8] "KVSCOPE\0" | u16 major (4) | u16 minor (2) |
//     u32 sectionCount (3) | u64 fileBytes (the file's exact size) |
//     u32 headerCrc (CRC-32C of these 64 bytes and the table, this field 0) |
//     36 zero bytes
//   section table, sectionCount x 24 bytes, in file order:
//     u32 tag | u32 crc32c of the section | u64 offset | u64 bytes
//   sections, back to back after the table:
//     "META"  UTF-8 JSON (below), at most kMaxMetaBytes
//     "TOKN"  i32 token ids [rows], the history the rows were computed from
//     "ROWS"  the cache rows in kv::KvCache's canonical order, per layer, K
//             then V, per KV head, rows 0..rows) (a sliding-window layer:
//             its last window - 1 rows): kv::KvLayout::canonicalBytes; then
//             the precision tail's rows (kv::KvCache::exportTail), if any
//   META: {"format": "kvscope-kv-cache",
//          "producer": {"app", "backend"},
//          "model": {"architecture", "name", "fingerprint" (hex), "layers",
//                    "layer_shapes": [[KV heads, head dim] per layer], "vocab"},
//          "cache": {"seed" (hex), "rows", "schemes": [[K, V] per layer],
//                    "row_bytes": [[K, V] per layer], "window" (0: none),
//                    "window_layers": [the sliding-window layers' indices],
//                    "tail": {"held", "bytes"} (only with a precision tail)},
//          "policy": {"text", "auto": "none" | "pending" | "settled" |
//                     "failed", "auto_plan" (runtime/auto_plan_json.h),
//                     "auto_failure"}}
//
// Reading validates before it allocates: the real file size against
// fileBytes, every section inside the file, the CRCs, and every META field's
// type and range; TOKN must hold `rows` ids inside the vocabulary and ROWS
// exactly the canonical bytes of `rows` rows. ROWS is streamed (KvFileReader::
// readRows) and its CRC checked as its last byte is read, so a restore never
// holds the file twice. Writes go to PATH.tmp, are flushed to disk and
// renamed over PATH, so a crash leaves the old file or the new one.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "kv/auto_policy.h"
#include "kv/kv_layout.h"

namespace kvscope::runtime {

inline constexpr uint16_t kKvFileMajor = 4;
inline constexpr uint16_t kKvFileMinor = 2;
inline constexpr uint64_t kMaxMetaBytes = 1 << 20;
inline constexpr uint32_t kMaxKvFileRows = 1 << 24;

enum class AutoState { kNone, kPending, kSettled, kFailed };

// What META and TOKN hold.
struct KvFileInfo {
  std::string backend;  // the producer's backend, for messages
  // The model the rows belong to.
  std::string architecture, modelName;
  uint64_t fingerprint = 0;  // model::modelFingerprint
  // nLayer: the cache's layers (the model's storing ones: ModelConfig::kvLayers()).
  uint32_t nLayer = 0, nVocab = 0;
  std::vector<kv::KvLayerShape> layerShapes;  // [nLayer]
  // The cache.
  uint64_t cacheSeed = kv::kDefaultCacheSeed;
  std::vector<kv::LayerSchemes> schemes;  // [nLayer]: the schemes the rows are stored in
  std::vector<int32_t> tokens;            // [rows]
  // The precision tail: the last rows it holds, and its bytes after the rows.
  uint32_t tailHeld = 0;
  uint64_t tailBytes = 0;
  // The session's policy: the text as the user gave it, and an auto policy's state.
  std::string policy;
  AutoState autoState = AutoState::kNone;
  std::optional<kv::AutoPlan> autoPlan;  // kSettled
  std::string autoFailure;               // kFailed
};

// Writes `info` and the rows `exportRows` produces (layout.canonicalBytes(rows)
// bytes in the canonical order, then info.tailBytes of the tail) to `path`
// atomically. `layout` gives the
// row bytes META records.
Status writeKvFile(
    const std::filesystem::path& path, const KvFileInfo& info, const kv::KvLayout& layout,
    const std::function<Status(const std::function<Status(std::span<const uint8_t>)>&)>&
        exportRows);

class KvFileReader {
 public:
  // Reads and validates everything but the rows (kBadFile naming what is
  // wrong; kIo when the file cannot be read).
  static Expected<KvFileReader> open(const std::filesystem::path& path);
  // The same from bytes in memory (the fuzzer).
  static Expected<KvFileReader> parse(std::string bytes);

  const KvFileInfo& info() const { return m_info; }
  uint32_t rows() const { return static_cast<uint32_t>(m_info.tokens.size()); }
  // Checks that `layout`, built from the file's schemes, stores rows of the
  // sizes the file records (a build whose schemes changed refuses the file)
  // and has its sliding-window layers.
  Status checkRowSizes(const kv::KvLayout& layout) const;
  // Reads all of ROWS once to check its CRC, then rewinds to its start: for a
  // restore that must be sure of the file before it empties a cache.
  Status verifyRows();
  // Fills `out` with the next bytes of ROWS (the rows, then the tail); past
  // the end, or a CRC mismatch when the last byte is read, is kBadFile.
  Status readRows(std::span<uint8_t> out);
  // After the import: every byte of ROWS was read (and so its CRC checked).
  Status finishRows() const;

 private:
  KvFileReader() = default;
  static Expected<KvFileReader> read(std::unique_ptr<std::istream> in, uint64_t size);

  KvFileInfo m_info;
  std::vector<std::vector<uint32_t>> m_rowBytes;  // [nLayer][K, V]
  uint32_t m_window = 0;                          // kv::KvGeometry::window
  std::vector<bool> m_windowLayers;               // [nLayer] when m_window > 0
  std::unique_ptr<std::istream> m_in;
  uint64_t m_rowsOffset = 0, m_rowsBytes = 0;
  uint64_t m_rowsLeft = 0;
  uint32_t m_rowsCrc = 0, m_rowsCrcSoFar = 0;
};

}  // namespace kvscope::runtime
