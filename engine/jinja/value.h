#pragma once
// The values a Jinja template computes with, behaving as their Python
// counterparts do under jinja2 (which is what Hugging Face renders chat
// templates with): None prints "None", True prints "True", 1.0 prints "1.0",
// a list prints as its repr, dicts keep insertion order, strings index and
// count by code point, an undefined value prints as nothing but fails when
// used for more than that.
//
// Lists and dicts are shared by reference, as in Python: a namespace() changed
// inside a loop is seen outside it. Strings are UTF-8.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_depth.h"

namespace kvscope::jinja {

// A user-facing template error (bad syntax, a type error, raise_exception).
// The interpreter adds the line; builtins throw it without one.
struct TemplateError {
  std::string message;
  int line = 0;                   // 1-based; 0 when not known yet
  bool raisedByTemplate = false;  // raise_exception(): the template's own message
};

class Value;
using Array = std::vector<Value>;

// A dict (insertion-ordered; keys are mostly strings, sometimes numbers) or a
// namespace() object, whose attributes may be assigned with {% set ns.x = … %}.
struct Object {
  std::vector<std::pair<Value, Value>> items;  // (key, value)
  bool isNamespace = false;

  const Value* find(std::string_view key) const;
  const Value* lookup(const Value& key) const;  // Python's == on keys: 1 and 1.0 match
  void set(const Value& key, Value value);
};

// Arguments of a call: f(a, b, key=c).
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;

  // The argument at `index` or named `name`; nullptr when absent.
  const Value* get(size_t index, std::string_view name) const;
  // Throws a TemplateError naming `function` when an argument is left unused.
  void expectAtMost(size_t count, std::string_view function) const;
};

struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> call;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kCallable };

  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  Value(bool b) : m_v(b) {}                      // NOLINT(google-explicit-constructor)
  Value(int64_t i) : m_v(i) {}                   // NOLINT(google-explicit-constructor)
  Value(int i) : m_v(int64_t{i}) {}              // NOLINT(google-explicit-constructor)
  Value(double d) : m_v(d) {}                    // NOLINT(google-explicit-constructor)
  Value(std::string s) : m_v(std::move(s)) {}    // NOLINT(google-explicit-constructor)
  Value(const char* s) : m_v(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  // A list or dict nests at most kMaxValueDepth levels: deeper is a
  // TemplateError, so printing, comparing and freeing a value never recurse
  // past a fixed bound whatever a template builds in a loop.
  Value(Array a);                                                       // NOLINT
  Value(Object o);                                                      // NOLINT
  // A function may capture values (a bound method its object), so it counts
  // as a reference (holdsReference).
  Value(Callable c)  // NOLINT(google-explicit-constructor)
      : m_v(std::make_shared<Callable>(std::move(c))), m_holdsReference(true) {}
  // A tuple: a list that prints as (a, b), as dict.items() pairs do.
  static Value tuple(Array items);

  // JSON as Python's json.loads gives it (objects keep their key order).
  // Throws a TemplateError past kMaxJsonDepth levels (core/json_depth.h).
  static Value fromJson(const nlohmann::ordered_json& json);

  Kind kind() const { return static_cast<Kind>(m_v.index()); }
  bool isUndefined() const { return kind() == Kind::kUndefined; }
  bool isNone() const { return kind() == Kind::kNone; }
  bool isBool() const { return kind() == Kind::kBool; }
  bool isInt() const { return kind() == Kind::kInt; }
  bool isFloat() const { return kind() == Kind::kFloat; }
  bool isNumber() const { return isInt() || isFloat() || isBool(); }
  bool isString() const { return kind() == Kind::kString; }
  bool isArray() const { return kind() == Kind::kArray; }
  bool isObject() const { return kind() == Kind::kObject; }
  bool isCallable() const { return kind() == Kind::kCallable; }
  bool isTuple() const { return m_tuple; }

  bool asBool() const { return std::get<bool>(m_v); }
  int64_t asInt() const;  // bools count as 0/1
  double asDouble() const;
  const std::string& asString() const { return std::get<std::string>(m_v); }
  const Array& asArray() const { return *std::get<std::shared_ptr<Array>>(m_v); }
  const Object& asObject() const { return *std::get<std::shared_ptr<Object>>(m_v); }
  Object& mutableObject() const { return *std::get<std::shared_ptr<Object>>(m_v); }
  const Callable& asCallable() const { return *std::get<std::shared_ptr<Callable>>(m_v); }
  // The name an undefined value was looked up by, for error messages.
  const std::string& undefinedName() const { return std::get<Undefined>(m_v).name; }

  // Python's truth value.
  bool truthy() const;
  // str(value): what {{ value }} prints ("" for undefined).
  std::string str() const;
  // repr(value), used for the items of a printed list or dict.
  std::string repr() const;
  // Python's ==, with 1 == 1.0 == True.
  bool equals(const Value& other) const;
  // "string", "list", "dict", … for error messages.
  std::string_view typeName() const;
  // Levels of lists and dicts, as counted when the value was built (a
  // namespace's later attributes are not counted: they hold no reference, so
  // they add at most kMaxValueDepth).
  int depth() const { return m_depth; }
  // Whether a namespace or a function (which may capture values) is
  // reachable from this value. Template code may not store such a value in a
  // namespace attribute, so nothing chains through assignments, and depth()
  // stays a bound.
  bool holdsReference() const { return m_holdsReference; }

 private:
  struct Undefined {
    std::string name;
  };
  std::variant<Undefined, std::nullptr_t, bool, int64_t, double, std::string,
               std::shared_ptr<Array>, std::shared_ptr<Object>, std::shared_ptr<Callable>>
      m_v;
  bool m_tuple = false;
  bool m_holdsReference = false;
  int m_depth = 0;
};

inline constexpr int kMaxValueDepth = 256;

// Python's repr() of a float ("1.0", "0.1", "1e+16").
std::string formatFloat(double value);

// json.dumps(value, ensure_ascii=False, indent=…, separators=…, sort_keys=…), the
// tojson filter Hugging Face installs. `indent` empty: one line with ", " and
// ": "; otherwise each item on its own line indented by `indent`.
struct JsonStyle {
  std::optional<std::string> indent;
  std::string itemSeparator;  // empty: Python's default for the indent mode
  std::string keySeparator;
  bool sortKeys = false;
};
std::string toJson(const Value& value, const JsonStyle& style);

// UTF-8 helpers: strings index, slice and measure by code point as in Python.
size_t codepointCount(std::string_view s);
std::vector<std::string> splitCodepoints(std::string_view s);

}  // namespace kvscope::jinja
