// Records what Tokenizers.js (@huggingface/tokenizers, the tokenizer code of
// transformers.js: an implementation this project did not write) makes of a
// list of strings with a Hugging Face tokenizer folder, as the oracle of
// tests/model/hf_folder_tokenizer_test.cpp. Not run in CI.
//
//   npm install --prefix /tmp/tokjs @huggingface/tokenizers@0.2.0
//   NODE_PATH=/tmp/tokjs/node_modules node tools/record-hf-tokenizations.mjs \
//       ../shared/tokenizer/hf-gemma3 STRINGS.inp > tests/data/tokenizer/hf-gemma3.out
//
// STRINGS.inp holds strings separated by "\n__ggml_vocab_test__\n" (llama.cpp's
// test-vector format); the output has one line per string: the ids without
// special tokens, space separated.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(join(process.cwd(), "noop.js"));
const { Tokenizer } = require("@huggingface/tokenizers");

const [folder, inputs] = process.argv.slice(2);
const json = (name) => JSON.parse(readFileSync(join(folder, name), "utf8"));
const tokenizer = new Tokenizer(json("tokenizer.json"), json("tokenizer_config.json"));
const separator = "\n__ggml_vocab_test__\n";
const text = readFileSync(inputs, "utf8");
const strings = text.split(separator);
if (text.endsWith(separator)) strings.pop();  // a closing separator ends the last string
for (const s of strings) {
  const { ids } = tokenizer.encode(s, { add_special_tokens: false });
  process.stdout.write(ids.join(" ") + "\n");
}
