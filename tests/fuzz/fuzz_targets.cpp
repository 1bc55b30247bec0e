#include "fuzz/fuzz_targets.h"

#include <fstream>

#include "model/model_file.h"
#include "model/model_tokenizer.h"
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
  known = "gguf, hf-config, safetensors";
#ifdef KVSCOPE_FUZZ_CONVERSATION
  known += ", conversation";
  if (name == "conversation") return std::make_unique<ConversationTarget>();
#endif
  if (name == "gguf") return std::make_unique<GgufTarget>(workDir);
  if (name == "hf-config") return std::make_unique<HfTarget>(seedRoot, workDir, true);
  if (name == "safetensors") return std::make_unique<HfTarget>(seedRoot, workDir, false);
  return nullptr;
}

}  // namespace kvscope::fuzz
