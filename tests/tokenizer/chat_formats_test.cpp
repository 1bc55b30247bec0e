// kvscope's built-in chat formats (what a user may choose when a model's own
// template fails). Each family is tested with a template string of that family
// (written from its published format) and the exact text its format renders.

#include "tokenizer/chat_formats.h"

#include <gtest/gtest.h>

#include <vector>

namespace kvscope::tokenizer {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are helpful."},
    {"user", "Hello"},
    {"assistant", "Hi there!"},
    {"user", "How are you?"},
};
const std::vector<ChatMessage> kNoSystem(kConversation.begin() + 1, kConversation.end());

const std::string kDsBos = "<｜begin▁of▁sentence｜>";
const std::string kDsEos = "<｜end▁of▁sentence｜>";
const std::string kDsUser = "<｜User｜>";
const std::string kDsAssistant = "<｜Assistant｜>";

std::string render(const std::string& source, const std::vector<ChatMessage>& messages,
                   FormatOptions options = {}) {
  const ChatFamily family = detectChatFamily(source);
  EXPECT_NE(family, ChatFamily::kUnknown) << source;
  return renderChatFormat(family, source, messages, options);
}

TEST(ChatFormat, ChatmlWithQwenDefaultSystem) {
  const std::string qwen2 =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
      "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
      "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
  EXPECT_EQ(detectChatFamily(qwen2), ChatFamily::kChatml);
  EXPECT_EQ(render(qwen2, kConversation),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\nHi there!<|im_end|>\n"
            "<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(render(qwen2, {{"user", "Hello"}}),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");

  const std::string plain =
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
      "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  EXPECT_EQ(render(plain, {{"user", "Hello"}}, {.addGenerationPrompt = false}),
            "<|im_start|>user\nHello<|im_end|>\n");
}

TEST(ChatFormat, Llama2) {
  const std::string meta =
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
      "{% set system_message = messages[0]['content'] %}{% else %}"
      "{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
      "{% for message in loop_messages %}{% if (message['role'] == 'user') != "
      "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
      "user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and "
      "system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
      "'\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
      "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + "
      "'[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
      "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";
  EXPECT_EQ(detectChatFamily(meta), ChatFamily::kLlama2);
  EXPECT_EQ(render(meta, kConversation),
            "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHello [/INST] Hi there! </s>"
            "<s>[INST] How are you? [/INST]");
}

TEST(ChatFormat, Llama3) {
  const std::string llama3 =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
      "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
      "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
      "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
  const FormatOptions options{.bosToken = "<|begin_of_text|>", .eosToken = "<|eot_id|>"};
  EXPECT_EQ(detectChatFamily(llama3), ChatFamily::kLlama3);
  EXPECT_EQ(render(llama3, kConversation, options),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are "
            "helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");

  // Llama 3.1 opens with a dated system turn whether or not there is a system message.
  const std::string llama31 =
      "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul "
      "2024\" %}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
      "{{- \"Cutting Knowledge Date: December 2023\\n\" }}{{- \"Today Date: \" + date_string + "
      "\"\\n\\n\" }}{{- system_message }}{{- \"<|eot_id|>\" }}";
  EXPECT_EQ(render(llama31, {{"user", "Hello"}}, options),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatFormat, MistralInstruct) {
  const std::string v2 =
      "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
      "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
      "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}"
      "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' "
      "%}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and "
      "assistant roles are supported!') }}{% endif %}{% endfor %}";
  EXPECT_EQ(detectChatFamily(v2), ChatFamily::kMistral);
  EXPECT_EQ(render(v2, kNoSystem),
            "<s>[INST] Hello [/INST]Hi there!</s>[INST] How are you? [/INST]");
  EXPECT_EQ(render(v2, kConversation),
            "<s>[INST] You are helpful.\n\nHello [/INST]Hi there!</s>[INST] How are you? [/INST]");

  const std::string v3 =
      "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] "
      "%}{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}"
      "{%- endif %}{{- bos_token }}{%- for message in loop_messages %}{%- if message['role'] == "
      "'user' %}{%- if loop.last and system_message is defined %}{{- '[INST] ' + system_message "
      "+ '\\n\\n' + message['content'] + '[/INST]' }}{%- else %}{{- '[INST] ' + "
      "message['content'] + '[/INST]' }}{%- endif %}{%- elif message['role'] == 'assistant' %}"
      "{{- ' ' + message['content'] + eos_token}}{%- endif %}{%- endfor %}";
  EXPECT_EQ(render(v3, kConversation),
            "<s>[INST] Hello[/INST] Hi there!</s>[INST] You are helpful.\n\nHow are you?[/INST]");
}

TEST(ChatFormat, Gemma) {
  const std::string gemma =
      "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role "
      "not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == "
      "'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must "
      "alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == "
      "'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
      "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + "
      "'<end_of_turn>\n' }}{% endfor %}{% if add_generation_prompt %}"
      "{{'<start_of_turn>model\n'}}{% endif %}";
  EXPECT_EQ(detectChatFamily(gemma), ChatFamily::kGemma);
  EXPECT_EQ(render(gemma, kNoSystem, {.bosToken = "<bos>", .eosToken = "<eos>"}),
            "<bos><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\nHi "
            "there!<end_of_turn>\n<start_of_turn>user\nHow are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

TEST(ChatFormat, Phi3) {
  const std::string mini =
      "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
      "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + "
      "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
      "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
      "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}";
  EXPECT_EQ(detectChatFamily(mini), ChatFamily::kPhi3);
  EXPECT_EQ(render(mini, kConversation),
            "<|system|>\nYou are helpful.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi "
            "there!<|end|>\n<|user|>\nHow are you?<|end|>\n<|assistant|>\n");
  EXPECT_EQ(render(mini, {{"user", "Hello"}},
                   {.addGenerationPrompt = false, .eosToken = "<|endoftext|>"}),
            "<|user|>\nHello<|end|>\n<|endoftext|>");
}

TEST(ChatFormat, Zephyr) {
  const std::string zephyr =
      "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
      "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n"
      "{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == "
      "'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
      "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n"
      "{% endfor %}";
  EXPECT_EQ(detectChatFamily(zephyr), ChatFamily::kZephyr);
  EXPECT_EQ(render(zephyr, kConversation),
            "<|system|>\nYou are helpful.</s>\n<|user|>\nHello</s>\n<|assistant|>\nHi "
            "there!</s>\n<|user|>\nHow are you?</s>\n<|assistant|>\n");
}

TEST(ChatFormat, Deepseek) {
  const std::string chat =
      "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
      "{% endif %}{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
      "{{ 'User: ' + message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}"
      "{{ 'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' "
      "%}{{ message['content'] + '\n\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
      "{{ 'Assistant:' }}{% endif %}";
  const FormatOptions options{.bosToken = kDsBos, .eosToken = kDsEos};
  EXPECT_EQ(detectChatFamily(chat), ChatFamily::kDeepseek);
  EXPECT_EQ(render(chat, kConversation, options),
            kDsBos + "You are helpful.\n\nUser: Hello\n\nAssistant: Hi there!" + kDsEos +
                "User: How are you?\n\nAssistant:");
}

TEST(ChatFormat, DeepseekCoder) {
  const std::string coder =
      "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
      "{% endif %}{%- set ns = namespace(found=false) -%}{%- for message in messages -%}"
      "{%- if message['role'] == 'system' -%}{%- set ns.found = true -%}{%- endif -%}"
      "{%- endfor -%}{{bos_token}}{%- if not ns.found -%}{{'You are an AI programming "
      "assistant, utilizing the Deepseek Coder model, developed by Deepseek Company, and you "
      "only answer questions related to computer science. For politically sensitive questions, "
      "security and privacy issues, and other non-computer science questions, you will refuse "
      "to answer\\n'}}{%- endif %}{%- for message in messages %}{%- if message['role'] == "
      "'system' %}{{ message['content'] }}{%- else %}{%- if message['role'] == 'user' %}"
      "{{'### Instruction:\\n' + message['content'] + '\\n'}}{%- else %}{{'### Response:\\n' + "
      "message['content'] + '\\n<|EOT|>\\n'}}{%- endif %}{%- endif %}{%- endfor %}"
      "{% if add_generation_prompt %}{{'### Response:'}}{% endif %}";
  const FormatOptions options{.bosToken = kDsBos, .eosToken = "<|EOT|>"};
  EXPECT_EQ(detectChatFamily(coder), ChatFamily::kDeepseekCoder);
  EXPECT_EQ(render(coder, kNoSystem, options),
            kDsBos +
                "You are an AI programming assistant, utilizing the Deepseek Coder model, "
                "developed by Deepseek Company, and you only answer questions related to "
                "computer science. For politically sensitive questions, security and privacy "
                "issues, and other non-computer science questions, you will refuse to answer\n"
                "### Instruction:\nHello\n### Response:\nHi there!\n<|EOT|>\n"
                "### Instruction:\nHow are you?\n### Response:");
}

TEST(ChatFormat, Deepseek3) {
  const std::string v3 =
      "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}"
      "{% endif %}{% set ns = namespace(system_prompt='') %}{%- for message in messages %}"
      "{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}"
      "{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}"
      "{%- if message['role'] == 'user' %}{{'" +
      kDsUser +
      "' + message['content']}}{%- endif %}"
      "{%- if message['role'] == 'assistant' %}{{'" +
      kDsAssistant + "' + message['content'] + '" + kDsEos +
      "'}}{%- endif %}{%- endfor -%}{% if add_generation_prompt %}{{'" + kDsAssistant +
      "'}}{% endif %}";
  const FormatOptions options{.bosToken = kDsBos, .eosToken = kDsEos};
  EXPECT_EQ(detectChatFamily(v3), ChatFamily::kDeepseek3);
  EXPECT_EQ(render(v3, kConversation, options), kDsBos + "You are helpful." + kDsUser + "Hello" +
                                                    kDsAssistant + "Hi there!" + kDsEos + kDsUser +
                                                    "How are you?" + kDsAssistant);
}

TEST(ChatFormat, NoTemplateOrAnUnknownOneMeansPlainCompletion) {
  EXPECT_EQ(detectChatFamily(""), ChatFamily::kNone);
  EXPECT_EQ(chatFamilyName(ChatFamily::kNone), "none");
  const std::string odd = "{% for m in messages %}<<{{ m.role }}>>{{ m.content }}{% endfor %}";
  EXPECT_EQ(detectChatFamily(odd), ChatFamily::kUnknown);
  // Replies continue the text directly, so the next turn re-renders what was streamed.
  EXPECT_EQ(renderChatFormat(ChatFamily::kUnknown, odd, kNoSystem, {}),
            "HelloHi there!How are you?");
  EXPECT_EQ(renderPlainChat(kNoSystem), "HelloHi there!How are you?");
}

}  // namespace
}  // namespace kvscope::tokenizer
