// ChatTemplate: the model's own Jinja template renders chats (checked against
// what Python's jinja2 renders, recorded in tests/data/chat_templates), a
// template that fails is an error naming the model and the line, and the user's
// other choices (built-in format, plain completion) render without it.

#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/text_file.h"
#include "gguf/gguf_file.h"
#include "handmade_vocab.h"
#include "support/test_support.h"
#include "tokenizer/gguf_vocab.h"

namespace kvscope::tokenizer {
namespace {

using Json = nlohmann::json;

const std::vector<ChatMessage> kConversation = {
    {"system", "You are helpful."},
    {"user", "Hello"},
    {"assistant", "Hi there!"},
    {"user", "How are you?"},
};

Json readJson(const std::filesystem::path& path) {
  return Json::parse(readTextFile(path).value());
}

TEST(ChatTemplate, Phi3TemplateFromTheVocabFixture) {
  const auto path = test::sharedFile("tokenizer/ggml-vocab-phi-3.gguf");
  KVS_REQUIRE_FIXTURE(path);
  auto file = gguf::GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().describe();
  auto vocab = vocabFromGguf(**file);
  ASSERT_TRUE(vocab.ok());
  const ChatTemplate tmpl(vocab->chatTemplate);
  EXPECT_EQ(tmpl.familyName(), "phi-3");
  // This Phi-3 template opens the assistant turn after every user turn itself.
  const auto prompt = tmpl.render(kConversation, {});
  ASSERT_TRUE(prompt.ok()) << prompt.error().message;
  EXPECT_EQ(prompt->text,
            "<s><|user|>\nHello<|end|>\n<|assistant|>\nHi there!<|end|>\n"
            "<|user|>\nHow are you?<|end|>\n<|assistant|>\n");
}

// The options reach the template as Hugging Face passes them: Qwen3's template
// with enable_thinking off (and on) renders what jinja2 rendered for the same
// conversation.
TEST(ChatTemplate, ThinkingSettingReachesQwen3sTemplate) {
  const auto config = test::sharedFile("tokenizer/hf-qwen3/tokenizer_config.json");
  KVS_REQUIRE_FIXTURE(config);
  const std::filesystem::path data = KVSCOPE_TEST_DATA;
  const Json conversations = readJson(data / "chat_templates" / "conversations.json");
  const Json expected = readJson(data / "chat_templates" / "expected" / "hf-qwen3.json");
  const ChatTemplate tmpl(readJson(config)["chat_template"].get<std::string>(), "qwen3");
  EXPECT_TRUE(tmpl.readsThinking());
  std::vector<ChatMessage> messages;
  for (const Json& m : conversations["cases"]["thinking_off"]["messages"])
    messages.push_back({m["role"], m["content"]});
  for (const bool think : {false, true}) {
    ChatOptions options;
    options.enableThinking = think;
    const auto prompt = tmpl.render(messages, options);
    ASSERT_TRUE(prompt.ok()) << prompt.error().message;
    EXPECT_EQ(prompt->text, expected[think ? "thinking_on.gen" : "thinking_off.gen"]["text"]);
  }
  // Off adds an empty think block; unset leaves the template's default (thinking).
  ChatOptions off;
  off.enableThinking = false;
  EXPECT_NE(tmpl.render(messages, off)->text, tmpl.render(messages, {})->text);
}

TEST(ChatTemplate, AFailingTemplateNamesTheModelAndLineAndTheOtherRenderersStillWork) {
  // Gemma 2's own rule, reduced: a system message raises.
  const std::string gemma =
      "{{ bos_token }}{% if messages[0]['role'] == 'system' %}\n"
      "{{ raise_exception('System role not supported') }}{% endif %}"
      "{% for m in messages %}<start_of_turn>{{ 'model' if m['role'] == 'assistant' else "
      "m['role'] }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
      "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}";
  const ChatTemplate tmpl(gemma, "gemma-2-2b-it.gguf");
  ASSERT_FALSE(tmpl.parseError());
  const auto failed = tmpl.render(kConversation, {});
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find("gemma-2-2b-it.gguf"), std::string::npos);
  EXPECT_NE(failed.error().message.find("line 2"), std::string::npos);
  EXPECT_NE(failed.error().message.find("System role not supported"), std::string::npos);

  ChatOptions builtin;
  builtin.renderer = ChatRenderer::kBuiltin;
  const auto viaBuiltin = tmpl.render(kConversation, builtin);
  ASSERT_TRUE(viaBuiltin.ok()) << viaBuiltin.error().message;
  EXPECT_EQ(viaBuiltin->renderer, ChatRenderer::kBuiltin);
  EXPECT_EQ(viaBuiltin->text, renderChatFormat(ChatFamily::kGemma, gemma, kConversation, {}));

  ChatOptions plain;
  plain.renderer = ChatRenderer::kPlain;
  const auto viaPlain = tmpl.render(kConversation, plain);
  ASSERT_TRUE(viaPlain.ok());
  EXPECT_TRUE(viaPlain->plain);
  EXPECT_EQ(viaPlain->text, "You are helpful.HelloHi there!How are you?");
}

TEST(ChatTemplate, ATemplateThatDoesNotParseIsAnErrorNotAFallback) {
  const ChatTemplate broken("{% for m in messages %}<|im_start|>{{ m.content }}", "broken.gguf");
  ASSERT_TRUE(broken.parseError());
  EXPECT_NE(broken.parseError()->message.find("broken.gguf"), std::string::npos);
  EXPECT_NE(broken.parseError()->message.find("endfor"), std::string::npos);
  EXPECT_FALSE(broken.render(kConversation, {}).ok());
  EXPECT_EQ(broken.family(), ChatFamily::kChatml);  // the built-in choice it offers
}

TEST(ChatTemplate, BuiltinIsRefusedWhenNoFamilyMatches) {
  const ChatTemplate odd("{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}");
  ChatOptions builtin;
  builtin.renderer = ChatRenderer::kBuiltin;
  EXPECT_FALSE(odd.render(kConversation, builtin).ok());
  // Its own template renders it.
  EXPECT_EQ(odd.render(kConversation, {})->text,
            "<<system>>You are helpful.<<user>>Hello<<assistant>>Hi there!<<user>>How are you?");
}

TEST(ChatTemplate, NoTemplateMeansPlainCompletionAndAChatVocabularyIsWarned) {
  const ChatTemplate none("");
  EXPECT_TRUE(none.empty());
  const auto prompt = none.render(std::vector<ChatMessage>{{"user", "Once upon a time"}}, {});
  ASSERT_TRUE(prompt.ok());
  EXPECT_TRUE(prompt->plain);
  EXPECT_EQ(prompt->text, "Once upon a time");
  auto chatVocab = Tokenizer::create(handmade::spmVocab());  // has <|im_start|> as a control token
  ASSERT_TRUE(chatVocab.ok());
  EXPECT_NE(missingTemplateWarning(*chatVocab).find("<|im_start|>"), std::string::npos);
}

TEST(ChatTemplate, EncodedPromptsCarryExactlyOneBos) {
  auto tok = Tokenizer::create(handmade::spmVocab());
  ASSERT_TRUE(tok.ok());
  const std::vector<ChatMessage> hi{{"user", "hi"}};
  // The template writes "<s>" itself; the vocabulary also asks for BOS: one BOS.
  const ChatTemplate mistral(
      "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}");
  const auto withBos = encodeChatPrompt(*tok, mistral.render(hi, {}).value());
  EXPECT_EQ(std::count(withBos.begin(), withBos.end(), 1), 1);
  EXPECT_EQ(withBos.front(), 1);
  // A template that writes none gets the vocabulary's BOS.
  const ChatTemplate zephyr("{% for m in messages %}<|user|>\n{{ m.content }}{% endfor %}");
  EXPECT_EQ(encodeChatPrompt(*tok, zephyr.render(hi, {}).value()).front(), 1);
  // Plain completion does not parse special tokens out of the user's text.
  const auto plain = encodeChatPrompt(
      *tok,
      ChatTemplate("").render(std::vector<ChatMessage>{{"user", "<|im_start|>"}}, {}).value());
  EXPECT_EQ(std::count(plain.begin(), plain.end(), handmade::kImStart), 0);
}

}  // namespace
}  // namespace kvscope::tokenizer
