#pragma once
// A Jinja template interpreter for the subset of jinja2 that chat templates use,
// rendering byte for byte what Hugging Face's apply_chat_template renders: a
// sandboxed jinja2 environment with trim_blocks, lstrip_blocks, the
// loop-controls extension, raise_exception() and strftime_now().
//
// Parse once, render many times; a Template is immutable and thread-safe.
// Templates come from model files, so they are untrusted: parsing and
// rendering are bounded (nesting depth, range() size, output size, steps) and
// every failure is an Error, never a crash.
//
//   auto t = jinja::Template::parse(source);       // kInvalidArgument: "line 3: …"
//   auto text = t->render(variables, now);          // variables: messages, tools, …
//
// Error messages start with the template line ("line 12: unknown filter 'x'");
// a raise_exception() from the template is kInvalidArgument with the
// template's own message after "line N: ".

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "jinja/value.h"

namespace kvscope::jinja {

struct Stmt;

struct RenderLimits {
  size_t maxOutputBytes = size_t{64} << 20;
  // Statements, expressions and loop iterations evaluated: 5 million take
  // about 3.5 s on the 2-core CI machine (a template looping on nothing).
  size_t maxSteps = 5'000'000;
  int maxCallDepth = 64;         // nested macro calls
};

class Template {
 public:
  static Expected<Template> parse(std::string_view source);

  // `variables` become the template's globals (messages, add_generation_prompt,
  // bos_token, …); `now` is what strftime_now() formats.
  Expected<std::string> render(const Object& variables, const std::tm& now,
                               const RenderLimits& limits = {}) const;

 private:
  std::shared_ptr<const std::vector<Stmt>> m_body;
};

// The local time now, for render().
std::tm localTimeNow();

}  // namespace kvscope::jinja
