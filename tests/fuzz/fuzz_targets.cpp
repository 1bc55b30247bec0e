#include "fuzz/fuzz_targets.h"

#include <cstring>
#include <fstream>
#include <map>

#include "backend/cpu_backend.h"
#include "core/checksum.h"
#include "jinja/template.h"
#include "model/default_model.h"
#include "model/model_file.h"
#include "model/model_tokenizer.h"
#include "runtime/backend_factory.h"
#include "runtime/kv_file.h"
#include "runtime/session.h"
#include "server/openai_api.h"
#include "tokenizer/chat_template.h"
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

// A GGUF file: header, metadata, tensor table, the model config and
// vocabulary, then as the app runs it: the weights bound and checked on the
// CPU backend and one forward step of a short prompt.
class GgufTarget : public Target {
 public:
  explicit GgufTarget(const fs::path& workDir) : m_file(workDir / "model.gguf") {}
  bool run(std::span<const uint8_t> input) override {
    writeFile(m_file, input);
    if (!openModel(m_file)) return false;
    auto file = model::ModelFile::open(m_file);
    if (!file.ok()) return false;
    std::shared_ptr<const model::ModelFile> model(std::move(file).value());
    auto tokenizer = model::loadTokenizer(*model);
    if (!tokenizer.ok()) return false;
    auto backend = backend::CpuBackend::create(model, {.contextLimit = 16, .threads = 1});
    if (!backend.ok()) return false;
    std::vector<int32_t> prompt = tokenizer->encode("Once upon", {.addSpecial = true});
    if (prompt.empty()) return false;
    prompt.resize(std::min<size_t>(prompt.size(), 8));
    backend::Logits logits;
    if (!(*backend)->forward({prompt}, logits).ok()) return false;
    volatile float sink = logits.last().front() + logits.last().back();
    (void)sink;
    return (*backend)->forward({std::span(prompt).first(1)}, logits).ok();
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
    auto parsed = kv::KvPolicy::parse(policy);  // the text is the fuzzer's input
    if (!parsed.ok()) return nullptr;
    auto backend = factory(*parsed);
    auto tok = model::loadTokenizer(*m_model);
    if (!backend.ok() || !tok.ok()) return nullptr;
    auto s = std::make_unique<runtime::Session>(m_model, std::move(backend).value(),
                                                std::move(tok).value(), factory, *parsed);
    return m_sessions.emplace(policy, std::move(s)).first->second.get();
  }

  fs::path m_file;
  std::shared_ptr<const model::ModelFile> m_model;
  std::map<std::string, std::unique_ptr<runtime::Session>> m_sessions;
};

// A fixed conversation, with a tool, as Hugging Face's apply_chat_template
// passes it to a template.
jinja::Object fixedConversation() {
  const auto messages = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "Let me look.", "reasoning_content": "A tool call."},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "user", "content": "Thanks! And <b>tomorrow</b>?"}])");
  const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}])");
  jinja::Object vars;
  vars.set("messages", jinja::Value::fromJson(messages));
  vars.set("tools", jinja::Value::fromJson(tools));
  vars.set("add_generation_prompt", true);
  vars.set("bos_token", "<s>");
  vars.set("eos_token", "</s>");
  vars.set("enable_thinking", false);
  return vars;
}

// Rendering bounded far below the app's limits, so one input takes
// milliseconds (the bounds themselves are what a hostile template meets).
constexpr jinja::RenderLimits kFuzzRenderLimits{
    .maxOutputBytes = size_t{1} << 20, .maxSteps = 200'000, .maxCallDepth = 64};

// A chat template, as a model file carries it: parsed, then rendered against
// a fixed conversation with tools. Accepted: it parsed.
class JinjaTarget : public Target {
 public:
  JinjaTarget() : m_vars(fixedConversation()) {}
  bool run(std::span<const uint8_t> input) override {
    const std::string_view source(reinterpret_cast<const char*>(input.data()), input.size());
    auto parsed = jinja::Template::parse(source);
    if (!parsed.ok()) return false;
    std::tm now{};
    now.tm_year = 126;
    now.tm_mon = 10;
    now.tm_mday = 26;
    // A template may refuse this conversation (raise_exception on roles it
    // does not take): a refusal, like any render error, is an outcome.
    (void)parsed->render(m_vars, now, kFuzzRenderLimits);
    return true;
  }

 private:
  jinja::Object m_vars;
};

// A request body for POST /v1/chat/completions or /v1/completions, parsed as
// the server parses it; an accepted chat request is then rendered, tools and
// all, with a real template that prints tools as JSON (Qwen3's).
class OpenAiRequestTarget : public Target {
 public:
  explicit OpenAiRequestTarget(const fs::path& seedRoot)
      : m_template(readText(seedRoot / ".." / ".." / "data" / "chat_templates" /
                            "Qwen-Qwen3-0.6B.jinja"),
                   "fuzz") {}
  bool run(std::span<const uint8_t> input) override {
    // Without the template every seed is refused, so a missing file stops the run.
    if (m_template.empty()) return false;
    const std::string_view body(reinterpret_cast<const char*>(input.data()), input.size());
    server::CompletionRequest completion;
    const bool isCompletion = !server::parseCompletionRequest(body, completion).has_value();
    server::ChatRequest chat;
    if (server::parseChatRequest(body, chat)) return isCompletion;
    tokenizer::ChatOptions options;
    options.toolsJson = chat.toolsJson;
    options.bosToken = "<s>";
    options.eosToken = "</s>";
    options.now = std::tm{};
    (void)m_template.render(chat.messages, options);
    // The reply as it would go back, its JSON written out.
    const server::ResponseMeta meta{.id = "chatcmpl-0", .model = chat.sampling.model};
    volatile size_t sink = server::jsonText(server::chatCompletionJson(
                                                meta, "reply", "", server::FinishReason::kStop, {}))
                               .size();
    (void)sink;
    return true;
  }

 private:
  static std::string readText(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  tokenizer::ChatTemplate m_template;
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
  known = "gguf, hf-config, safetensors, kv-cache, jinja, openai-request";
#ifdef KVSCOPE_FUZZ_CONVERSATION
  known += ", conversation";
  if (name == "conversation") return std::make_unique<ConversationTarget>();
#endif
  if (name == "gguf") return std::make_unique<GgufTarget>(workDir);
  if (name == "jinja") return std::make_unique<JinjaTarget>();
  if (name == "openai-request") return std::make_unique<OpenAiRequestTarget>(seedRoot);
  if (name == "kv-cache") return std::make_unique<KvCacheTarget>(workDir);
  if (name == "hf-config") return std::make_unique<HfTarget>(seedRoot, workDir, true);
  if (name == "safetensors") return std::make_unique<HfTarget>(seedRoot, workDir, false);
  return nullptr;
}

}  // namespace kvscope::fuzz
