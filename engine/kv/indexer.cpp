#include "kv/indexer.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace kvscope::kv {
namespace {

bool parseCount(std::string_view s, uint32_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && ec == std::errc() && end == s.data() + s.size();
}

}  // namespace

Status IndexerOptions::parseInto(std::string_view text, IndexerOptions& out) {
  if (text == "off") {
    out.topK = 0;
    return okStatus();
  }
  uint32_t fields[3] = {0, out.window, out.sinks};
  size_t start = 0;
  for (int i = 0; i < 3; ++i) {
    const size_t colon = std::min(text.find(':', start), text.size());
    if (!parseCount(text.substr(start, colon - start), fields[i])) {
      return makeError(ErrorCode::kInvalidArgument,
                       "indexer '{}': expected TOP_K[:WINDOW[:SINKS]] with whole numbers of rows, "
                       "e.g. 512 or 256:64:4 (or 'off')",
                       text);
    }
    start = colon + 1;
    if (colon == text.size()) break;
    if (i == 2)
      return makeError(ErrorCode::kInvalidArgument,
                       "indexer '{}': at most three fields, TOP_K:WINDOW:SINKS", text);
  }
  out.topK = fields[0];
  out.window = fields[1];
  out.sinks = fields[2];
  return okStatus();
}

std::string IndexerOptions::selectionText() const {
  if (!enabled()) return "off";
  return fmt::format("{}:{}:{}", topK, window, sinks);
}

namespace {

const char* scoreName(PageScore s) {
  return s == PageScore::kMeanStd ? "meanstd" : "bounds";
}

}  // namespace

Status IndexerOptions::parseScorer(std::string_view name, IndexerOptions& out) {
  for (PageScore score : {PageScore::kBounds, PageScore::kMeanStd}) {
    for (uint32_t rows : {16u, 32u, 64u}) {
      if (name == fmt::format("{}{}", scoreName(score), rows)) {
        out.pageScore = score;
        out.pageRows = rows;
        return okStatus();
      }
    }
  }
  return makeError(ErrorCode::kInvalidArgument,
                   "unknown indexer scorer '{}' (bounds16, bounds32, bounds64, meanstd16, "
                   "meanstd32 or meanstd64)",
                   name);
}

std::string IndexerOptions::scorerText() const {
  return fmt::format("{}{}", scoreName(pageScore), pageRows);
}

bool IndexerOptions::denseHead(uint32_t layer, uint32_t head) const {
  return std::binary_search(denseHeads.begin(), denseHeads.end(), KvHeadRef{layer, head});
}

Status IndexerOptions::parseDenseHeads(std::string_view text, IndexerOptions& out) {
  out.autoDenseHeads = text == "auto";
  if (out.autoDenseHeads) {
    out.denseHeads.clear();
    return okStatus();
  }
  std::vector<KvHeadRef> heads;
  size_t start = 0;
  while (text != "none" && start <= text.size()) {
    const size_t plus = std::min(text.find('+', start), text.size());
    const std::string_view item = text.substr(start, plus - start);
    const size_t dot = item.find('.');
    KvHeadRef h;
    if (dot == std::string_view::npos || !parseCount(item.substr(0, dot), h.layer) ||
        !parseCount(item.substr(dot + 1), h.head)) {
      return makeError(ErrorCode::kInvalidArgument,
                       "indexer dense heads '{}': expected LAYER.KV_HEAD pairs joined by '+', "
                       "e.g. 2.0+3.1 (or 'none', or 'auto' to measure them)",
                       text);
    }
    heads.push_back(h);
    start = plus + 1;
  }
  std::sort(heads.begin(), heads.end());
  if (std::adjacent_find(heads.begin(), heads.end()) != heads.end())
    return makeError(ErrorCode::kInvalidArgument, "indexer dense heads '{}' names a head twice",
                     text);
  out.denseHeads = std::move(heads);
  return okStatus();
}

std::string IndexerOptions::denseHeadsText() const {
  if (denseHeads.empty()) return "none";
  std::string s;
  for (const KvHeadRef& h : denseHeads)
    s += fmt::format("{}{}.{}", s.empty() ? "" : "+", h.layer, h.head);
  return s;
}

std::string IndexerOptions::policyItems() const {
  std::string s;
  if (enabled()) s += ",indexer=" + selectionText();
  if (scorerText() != IndexerOptions{}.scorerText()) s += ",indexer_scorer=" + scorerText();
  if (denseLayers != IndexerOptions{}.denseLayers)
    s += fmt::format(",indexer_dense={}", denseLayers);
  if (autoDenseHeads)
    s += ",indexer_dense_heads=auto";
  else if (!denseHeads.empty())
    s += ",indexer_dense_heads=" + denseHeadsText();
  if (sparseV > 0.0f) s += fmt::format(",sparse_v={}", sparseV);
  return s;
}

Status IndexerOptions::check() const {
  if (!(sparseV >= 0.0f && sparseV < 1.0f))
    return makeError(ErrorCode::kInvalidArgument,
                     "sparse_v must be a weight in [0, 1), e.g. 0.001, not {}", sparseV);
  if (pageRows != 16 && pageRows != 32 && pageRows != 64)
    return makeError(ErrorCode::kInvalidArgument,
                     "the indexer's pages hold 16, 32 or 64 rows, not {}", pageRows);
  if (!std::is_sorted(denseHeads.begin(), denseHeads.end()) ||
      std::adjacent_find(denseHeads.begin(), denseHeads.end()) != denseHeads.end())
    return makeError(ErrorCode::kInvalidArgument,
                     "the indexer's dense heads must be sorted without repeats");
  return okStatus();
}

Status IndexerOptions::checkHeads(std::span<const uint32_t> headsKv) const {
  KVS_TRY(check());
  for (const KvHeadRef& h : denseHeads) {
    if (h.layer >= headsKv.size())
      return makeError(ErrorCode::kInvalidArgument,
                       "indexer dense head {}.{}: the model's cache has layers 0-{}", h.layer,
                       h.head, headsKv.size() - 1);
    if (h.head >= headsKv[h.layer])
      return makeError(ErrorCode::kInvalidArgument,
                       "indexer dense head {}.{}: layer {} has KV heads 0-{}", h.layer, h.head,
                       h.layer, headsKv[h.layer] - 1);
  }
  return okStatus();
}

bool selectsAll(const IndexerOptions& options, uint32_t rows) {
  if (!options.enabled() || rows == 0) return true;
  const uint32_t sinkEnd = std::min(options.sinks, rows);
  const uint32_t windowBegin = rows - std::min(options.window, rows);
  if (sinkEnd >= windowBegin) return true;  // sinks and window hold every row
  // The candidates (pages with a row outside sinks and window) are pages
  // sinkEnd / R .. (windowBegin - 1) / R.
  const uint32_t candidates =
      (windowBegin - 1) / options.pageRows - sinkEnd / options.pageRows + 1;
  return pickedPages(options) >= candidates;
}

IndexerOptions selectionOptions(IndexerOptions options, uint32_t tailRows) {
  options.window = std::max(options.window, tailRows);
  return options;
}

uint32_t pickedPages(const IndexerOptions& options) {
  return static_cast<uint32_t>((uint64_t{options.topK} + options.pageRows - 1) / options.pageRows);
}

bool selectRows(const IndexerOptions& options, uint32_t rows, const float* pageScores,
                std::vector<RowRun>& out) {
  out.clear();
  if (selectsAll(options, rows)) return false;
  const uint32_t pages = (rows + options.pageRows - 1) / options.pageRows;
  const uint32_t sinkEnd = std::min(options.sinks, rows);
  const uint32_t windowBegin = rows - std::min(options.window, rows);
  // Pages with a row outside sinks and window compete for the budget.
  const auto pageBegin = [&](uint32_t p) { return p * options.pageRows; };
  const auto pageEnd = [&](uint32_t p) { return std::min(rows, (p + 1) * options.pageRows); };
  std::vector<uint32_t> candidates;
  for (uint32_t p = 0; p < pages; ++p)
    if (pageEnd(p) > sinkEnd && pageBegin(p) < windowBegin) candidates.push_back(p);
  const size_t wanted = pickedPages(options);
  // Highest score first, then the lower page; a NaN score ranks lowest.
  const auto key = [&](uint32_t p) {
    const float s = pageScores[p];
    return std::isnan(s) ? -INFINITY : s;
  };
  const auto better = [&](uint32_t a, uint32_t b) {
    const float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  };
  std::nth_element(candidates.begin(), candidates.begin() + static_cast<ptrdiff_t>(wanted),
                   candidates.end(), better);
  candidates.resize(wanted);
  std::sort(candidates.begin(), candidates.end());
  // Runs in cache order: sinks, the picked pages, the window; touching runs merge.
  const auto add = [&](uint32_t begin, uint32_t end) {
    if (begin >= end) return;
    if (!out.empty() && begin <= out.back().end) {
      out.back().end = std::max(out.back().end, end);
    } else {
      out.push_back({begin, end});
    }
  };
  add(0, sinkEnd);
  for (uint32_t p : candidates) add(pageBegin(p), pageEnd(p));
  add(windowBegin, rows);
  return true;
}

uint32_t rowCount(const std::vector<RowRun>& runs) {
  uint32_t n = 0;
  for (const RowRun& r : runs) n += r.end - r.begin;
  return n;
}

}  // namespace kvscope::kv
