// Session::saveCache / restoreCache: the session's side of runtime/kv_file.h.

#include <fmt/format.h>

#include "backend/backend.h"
#include "kv/kv_policy.h"
#include "model/model_fingerprint.h"
#include "runtime/kv_file.h"
#include "runtime/session.h"

namespace kvscope::runtime {

uint64_t Session::modelFingerprint() const {
  if (!m_fingerprint) m_fingerprint = model::modelFingerprint(config().architecture, *m_model);
  return *m_fingerprint;
}

Status Session::saveCache(const std::filesystem::path& path) const {
  const kv::KvLayout* layout = m_backend->kvLayout();
  if (!m_model || !layout) {
    return makeError(ErrorCode::kUnsupported, "the {} backend cannot save its KV cache",
                     m_backend->name());
  }
  if (m_history.size() != m_backend->cachedTokens()) {
    return makeError(ErrorCode::kInternal, "the history ({} tokens) and the cache ({}) disagree",
                     m_history.size(), m_backend->cachedTokens());
  }
  const model::ModelConfig& c = config();
  KvFileInfo info;
  info.backend = std::string(m_backend->name());
  info.architecture = c.architecture;
  info.modelName = m_model->path().filename().string();
  info.fingerprint = modelFingerprint();
  info.nLayer = c.kvLayers();
  info.layerShapes = layout->geometry().layers;
  info.nVocab = c.nVocab;
  info.cacheSeed = layout->cacheSeed();
  info.schemes = layout->layerSchemes();
  info.tokens = m_history;
  info.policy = m_kvPolicy.toString();
  if (m_autoPlan) {
    info.autoState = AutoState::kSettled;
    info.autoPlan = m_autoPlan;
  } else if (m_kvPolicy.autoBits && !m_autoFailure.empty()) {
    info.autoState = AutoState::kFailed;
    info.autoFailure = m_autoFailure;
  } else if (autoPending()) {
    info.autoState = AutoState::kPending;
  }
  info.tailHeld = m_backend->kvTailHeld();
  info.tailBytes = m_backend->kvTailBytes(static_cast<uint32_t>(m_history.size()), info.tailHeld);
  return writeKvFile(path, info, *layout, [&](const auto& write) -> Status {
    KVS_TRY(m_backend->exportKv(write));
    return m_backend->exportKvTail(write);
  });
}

Status Session::restoreCache(const std::filesystem::path& path, Observer* observer) {
  if (!m_model)
    return makeError(ErrorCode::kUnsupported, "this session has no model file to check against");
  KVS_ASSIGN_OR_RETURN(KvFileReader reader, KvFileReader::open(path));
  const KvFileInfo& info = reader.info();
  const model::ModelConfig& c = config();
  const uint64_t fingerprint = modelFingerprint();
  if (info.fingerprint != fingerprint || info.architecture != c.architecture ||
      info.nLayer != c.kvLayers() || info.layerShapes != backend::kvLayerShapes(c) ||
      info.nVocab != c.nVocab) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the saved KV cache belongs to another model ({}, fingerprint {:016x}); "
                     "this is {} ({:016x})",
                     info.modelName, info.fingerprint, m_model->path().filename().string(),
                     fingerprint);
  }
  // The file holds the policy as text (kv_file.h); it is parsed here, once.
  KVS_ASSIGN_OR_RETURN(const kv::KvPolicy saved, kv::KvPolicy::parse(info.policy));
  if (!saved.sameCache(m_kvPolicy)) {
    return makeError(ErrorCode::kInvalidArgument,
                     "the saved KV cache was made under policy '{}', this session uses '{}'",
                     saved.toString(), m_kvPolicy.toString());
  }
  if (info.autoState != AutoState::kNone && !saved.autoBits)
    return makeError(ErrorCode::kBadFile,
                     "the saved KV cache has an auto state but no auto policy");
  if (info.autoState == AutoState::kSettled && info.autoPlan->schemes() != info.schemes)
    return makeError(ErrorCode::kBadFile, "the saved KV cache's auto plan is not its schemes");

  // The file's rows as `b` would lay them out, once the file's row sizes and
  // length are known to fit it.
  const auto layoutFor = [&](const backend::Backend& b) -> Expected<kv::KvLayout> {
    if (!b.kvLayout()) {
      return makeError(ErrorCode::kUnsupported, "the {} backend cannot restore a KV cache",
                       b.name());
    }
    KVS_ASSIGN_OR_RETURN(kv::KvLayout layout, kv::KvLayout::create(b.kvLayout()->geometry(),
                                                                   info.schemes, info.cacheSeed));
    KVS_TRY(reader.checkRowSizes(layout));
    if (reader.rows() > b.contextLimit()) {
      return makeError(ErrorCode::kInvalidArgument,
                       "the saved KV cache holds {} tokens, more than this session's context of {}",
                       reader.rows(), b.contextLimit());
    }
    return layout;
  };

  // Into this session's backend when it stores what the file holds (emptied
  // only once the whole file checked out); otherwise into a new one, swapped
  // in only on success.
  backend::Backend* target = m_backend.get();
  std::unique_ptr<backend::Backend> built;
  const kv::KvLayout* own = m_backend->kvLayout();
  const bool sameRows =
      own && own->layerSchemes() == info.schemes && own->cacheSeed() == info.cacheSeed;
  if (!sameRows) {
    if (!m_factory) {
      return makeError(ErrorCode::kUnsupported,
                       "this session was opened without a backend factory, so it can restore "
                       "only a cache stored as its own");
    }
    // An auto policy that chose, or a two-phase cache in the other phase.
    // The rows are the file's; how attention reads them is this session's.
    kv::KvPolicy policy =
        info.autoState == AutoState::kSettled ? saved.withLayers(info.schemes) : saved;
    policy.attention = m_kvPolicy.attention;
    KVS_ASSIGN_OR_RETURN(built, build(policy));
    target = built.get();
  }
  KVS_ASSIGN_OR_RETURN(const kv::KvLayout fileLayout, layoutFor(*target));
  if (!built && m_backend->cachedTokens() != 0) {
    KVS_TRY(reader.verifyRows());
    KVS_TRY(m_backend->trim(0));
    m_history.clear();
  }
  const auto read = [&](std::span<uint8_t> out) { return reader.readRows(out); };
  KVS_TRY(target->importKv(fileLayout, reader.rows(), read));
  Status all = okStatus();
  if (target->kvTailBytes(reader.rows(), info.tailHeld) != info.tailBytes) {
    all = makeError(ErrorCode::kBadFile,
                    "the saved KV cache's precision tail does not fit this cache's");
  } else {
    all = target->importKvTail(info.tailHeld, read);
  }
  if (all.ok()) all = reader.finishRows();
  if (!all.ok()) {
    (void)target->trim(0);
    return all;
  }
  if (built) m_backend = std::move(built);
  m_history = info.tokens;
  m_autoPlan = info.autoState == AutoState::kSettled ? info.autoPlan : std::nullopt;
  m_autoFailure = info.autoState == AutoState::kFailed ? info.autoFailure : std::string();
  report(observer);
  return okStatus();
}

}  // namespace kvscope::runtime
