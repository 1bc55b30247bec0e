#pragma once
// How deeply a JSON text nests its arrays and objects, measured on the text
// itself in one pass with no recursion, so untrusted JSON (a request body, a
// file) can be refused before anything walks it recursively: nlohmann's
// dump(), comparisons and copies, and jinja::Value::fromJson all recurse once
// per level, and 100,000 levels overflow a thread's stack.
//
// Brackets inside strings (escapes included) do not count. The text need not
// be valid JSON: the parser that runs after this check reports what is wrong.

#include <cstddef>
#include <string_view>

namespace kvscope {

// The nesting every JSON reader of kvscope accepts: far above what any real
// request, config.json, tokenizer.json or chat message needs (they stay under
// 10), far below what recursion on a 512 KiB thread stack can take.
inline constexpr size_t kMaxJsonDepth = 64;

// The deepest nesting in `text`: 0 for a scalar, 1 for [1, 2], 2 for [[1]].
// Stops counting once past `limit` and returns limit + 1.
size_t jsonNestingDepth(std::string_view text, size_t limit = kMaxJsonDepth);

}  // namespace kvscope
