#include "fuzz/fuzz_targets.h"

#include <cstring>
#include <fstream>
#include <map>

#include "core/checksum.h"
#include "model/default_model.h"
#include "model/model_file.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/kv_file.h"
#include "runtime/session.h"
#include "support/kv_file_parts.h"
#ifdef KVSCOPE_FUZZ_CONVERSATION
#include "ui/conversation_store.h"
#endif

namespace kvscope::fuzz {
namespace {

namespace fs = std::filesystem;

void writeFile(const fs::path& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// Opens `path` as the app does and reads what it returned.
bool openModel(const fs::path& path) {
  auto model = model::ModelFile::open(path);
  if (!model.ok()) return false;
  volatile uint8_t sink = 0;
  for (const model::TensorView& t : (*model)->all()) {
    if (t.data.empty()) continue;
    sink = sink ^ t.data.front() ^ t.data.back();
  }
  (void)model::loadTokenizer(**model);
  return true;
}

// A GGUF file: header, metadata, tensor table, the model config and vocabulary.
class GgufTarget : public Target {
 public:
  explicit GgufTarget(const fs::path& workDir) : m_file(workDir / "model.gguf") {}
  bool run(std::span<const uint8_t> input) override {
    writeFile(m_file, input);
    return openModel(m_file);
  }

 private:
  fs::path m_file;
};

// A Hugging Face folder with one file fuzzed (config.json or
// model.safetensors) and the other one valid.
class HfTarget : public Target {
 public:
  HfTarget(const fs::path& seedRoot, const fs::path& workDir, bool fuzzConfig)
      : m_dir(workDir), m_fuzzed(workDir / (fuzzConfig ? "config.json" : "model.safetensors")) {
    const fs::path valid = fuzzConfig ? seedRoot / "safetensors" / "tiny-llama.safetensors"
                                      : seedRoot / "hf-config" / "tiny-llama.json";
    fs::copy_file(valid, workDir / (fuzzConfig ? "model.safetensors" : "config.json"),
                  fs::copy_options::overwrite_existing);
  }
  bool run(std::span<const uint8_t> input) override {
    writeFile(m_fuzzed, input);
    return openModel(m_dir);
  }

 private:
  fs::path m_dir;
  fs::path m_fuzzed;
};

// A saved KV cache (runtime/kv_file.h), restored into a session of the demo
// model under the policy the file names, as the app reopens a conversation.
// A mutation almost always breaks a CRC, which stops the reader at the header;
// so every other input is resealed first (support/kv_file_parts.h: section
// CRCs, offsets, size and header CRC made to agree) to reach the metadata,
// token and row checks and the import behind them.
class KvCacheTarget : public Target {
 public:
  explicit KvCacheTarget(const fs::path& workDir) : m_file(workDir / "chat.kvcache") {
    auto path = model::findDefaultModel();
    if (!path.ok()) return;
    auto file = model::ModelFile::open(*path);
    if (file.ok()) m_model = std::shared_ptr<const model::ModelFile>(std::move(file).value());
  }
  bool run(std::span<const uint8_t> input) override {
    std::string bytes(input.begin(), input.end());
    if (crc32c(input) & 1) {
      if (auto parts = test::splitKvFile(bytes)) bytes = test::joinKvFile(*parts, bytes);
    }
    writeFile(m_file, {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    auto reader = runtime::KvFileReader::open(m_file);
    if (!reader.ok()) return false;
    runtime::Session* session = sessionFor(reader->info().policy);
    if (!session) return false;
    const bool restored = session->restoreCache(m_file).ok();
    (void)session->trim(0);  // empty again for the next input
    return restored;
  }

 private:
  // One session per policy text seen (a few: mutated texts mostly fail to parse).
  runtime::Session* sessionFor(const std::string& policy) {
    if (!m_model) return nullptr;
    if (auto it = m_sessions.find(policy); it != m_sessions.end()) return it->second.get();
    if (m_sessions.size() >= 16) return nullptr;
    const runtime::BackendFactory factory = runtime::makeBackendFactory(
        m_model, {.kind = "cpu", .contextLimit = 512, .threads = 1, .vetDevice = false});
    auto backend = factory(policy);
    auto tok = model::loadTokenizer(*m_model);
    if (!backend.ok() || !tok.ok()) return nullptr;
    auto s = std::make_unique<runtime::Session>(m_model, std::move(backend).value(),
                                                std::move(tok).value(), factory, policy);
    return m_sessions.emplace(policy, std::move(s)).first->second.get();
  }

  fs::path m_file;
  std::shared_ptr<const model::ModelFile> m_model;
  std::map<std::string, std::unique_ptr<runtime::Session>> m_sessions;
};

#ifdef KVSCOPE_FUZZ_CONVERSATION
// A saved conversation, as ConversationStore::load reads each file.
class ConversationTarget : public Target {
 public:
  bool run(std::span<const uint8_t> input) override {
    const QByteArray bytes(reinterpret_cast<const char*>(input.data()),
                           static_cast<qsizetype>(input.size()));
    return ui::ConversationStore::parse(bytes).ok();
  }
};
#endif

}  // namespace

std::unique_ptr<Target> makeTarget(const std::string& name, const fs::path& seedRoot,
                                   const fs::path& workDir, std::string& known) {
  known = "gguf, hf-config, safetensors, kv-cache";
#ifdef KVSCOPE_FUZZ_CONVERSATION
  known += ", conversation";
  if (name == "conversation") return std::make_unique<ConversationTarget>();
#endif
  if (name == "gguf") return std::make_unique<GgufTarget>(workDir);
  if (name == "kv-cache") return std::make_unique<KvCacheTarget>(workDir);
  if (name == "hf-config") return std::make_unique<HfTarget>(seedRoot, workDir, true);
  if (name == "safetensors") return std::make_unique<HfTarget>(seedRoot, workDir, false);
  return nullptr;
}

}  // namespace kvscope::fuzz
