// The global functions chat templates call (builtins.h): range, dict,
// namespace, raise_exception and strftime_now.
#include <ctime>

#include <fmt/format.h>

#include "jinja/builtin_support.h"
#include "jinja/builtins.h"

namespace kvscope::jinja {
namespace {

constexpr size_t kMaxRange = 1'000'000;  // range() larger than this is a hostile template

}  // namespace

using namespace detail;

Object makeGlobals(const std::tm& now) {
  Object g;
  g.set("range", method("range", [](const CallArgs& a) {
          a.expectAtMost(3, "range");
          if (a.positional.empty()) typeError("range expected at least 1 argument");
          int64_t start = 0, stop = 0, step = 1;
          if (a.positional.size() == 1) {
            stop = needInt(a.positional[0], "range");
          } else {
            start = needInt(a.positional[0], "range");
            stop = needInt(a.positional[1], "range");
            if (a.positional.size() == 3) step = needInt(a.positional[2], "range");
          }
          if (step == 0) typeError("range() arg 3 must not be zero");
          Array out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (out.size() >= kMaxRange) typeError("range() too large for a template");
            out.emplace_back(i);
          }
          return Value(std::move(out));
        }));
  g.set("dict", method("dict", [](const CallArgs& a) {
          if (!a.positional.empty()) typeError("dict() takes keyword arguments only");
          Object o;
          for (const auto& [k, v] : a.named) o.set(k, v);
          return Value(std::move(o));
        }));
  g.set("namespace", method("namespace", [](const CallArgs& a) {
          Object o;
          o.isNamespace = true;
          if (!a.positional.empty()) {
            if (!a.positional[0].isObject())
              typeError("namespace() takes a dict or keyword arguments");
            for (const auto& [k, v] : a.positional[0].asObject().items) o.set(k, v);
          }
          for (const auto& [k, v] : a.named) o.set(k, v);
          return Value(std::move(o));
        }));
  g.set("raise_exception", method("raise_exception", [](const CallArgs& a) -> Value {
          const Value* message = a.get(0, "message");
          throw TemplateError{message ? message->str() : std::string("raise_exception() called"), 0,
                              true};
        }));
  g.set("strftime_now", method("strftime_now", [now](const CallArgs& a) {
          a.expectAtMost(1, "strftime_now");
          const std::string& format =
              needString(needArg(a, 0, "format", "strftime_now"), "strftime_now");
          char buf[512];
          const size_t n = std::strftime(buf, sizeof buf, format.c_str(), &now);
          return Value(std::string(buf, n));
        }));
  return g;
}

}  // namespace kvscope::jinja
