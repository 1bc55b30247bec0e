// Python's str, list and dict methods as chat templates call them, and
// jinja2's attribute, item and slice access (builtins.h).
#include <algorithm>

#include <fmt/format.h>

#include "jinja/builtin_support.h"
#include "jinja/builtins.h"

namespace kvscope::jinja {
namespace {

using namespace detail;

Value stringMethod(const std::string& s, const std::string& name) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip";
    const bool right = name != "lstrip";
    return method(name, [s, left, right, name](const CallArgs& a) {
      return Value(stripArgs(Value(s), a, left, right, name));
    });
  }
  if (name == "split")
    return method(name, [s](const CallArgs& a) { return Value(split(s, a, "split")); });
  if (name == "rsplit") return method(name, [s](const CallArgs& a) { return Value(rsplit(s, a)); });
  if (name == "splitlines") {
    return method(name, [s](const CallArgs& a) {
      a.expectAtMost(0, "splitlines");
      Array out;
      size_t start = 0;
      while (start < s.size()) {
        size_t end = s.find_first_of("\n\r", start);
        if (end == std::string::npos) {
          out.emplace_back(s.substr(start));
          break;
        }
        out.emplace_back(s.substr(start, end - start));
        start = end + (s[end] == '\r' && end + 1 < s.size() && s[end + 1] == '\n' ? 2 : 1);
      }
      return Value(std::move(out));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool start = name == "startswith";
    return method(name, [s, start, name](const CallArgs& a) {
      a.expectAtMost(1, name);
      const Value* affix = a.get(0, "prefix");
      if (!affix) typeError(name + "() takes one argument");
      return Value(startsOrEndsWith(s, *affix, start, name));
    });
  }
  if (name == "replace") {
    return method(name, [s](const CallArgs& a) {
      a.expectAtMost(3, "replace");
      const Value* from = a.get(0, "old");
      const Value* to = a.get(1, "new");
      const Value* count = a.get(2, "count");
      if (!from || !to) typeError("replace() takes two arguments");
      return Value(replaceAll(s, needString(*from, "replace"), needString(*to, "replace"),
                              count ? needInt(*count, "replace") : -1));
    });
  }
  if (name == "upper") return method(name, [s](const CallArgs&) { return Value(upper(s)); });
  if (name == "lower") return method(name, [s](const CallArgs&) { return Value(lower(s)); });
  if (name == "title") return method(name, [s](const CallArgs&) { return Value(title(s)); });
  if (name == "capitalize")
    return method(name, [s](const CallArgs&) { return Value(capitalize(s)); });
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    return method(name, [s, name](const CallArgs& a) {
      a.expectAtMost(1, name);
      const Value* sub = a.get(0, "sub");
      if (!sub) typeError(name + "() takes one argument");
      const std::string& x = needString(*sub, name);
      if (name == "count") {
        if (x.empty()) return Value(static_cast<int64_t>(codepointCount(s) + 1));
        int64_t n = 0;
        for (size_t at = s.find(x); at != std::string::npos; at = s.find(x, at + x.size())) ++n;
        return Value(n);
      }
      const size_t at = name == "rfind" ? s.rfind(x) : s.find(x);
      if (at == std::string::npos) {
        if (name == "index") typeError("substring not found");
        return Value(int64_t{-1});
      }
      return Value(static_cast<int64_t>(codepointCount(std::string_view(s).substr(0, at))));
    });
  }
  if (name == "join") {
    return method(name, [s](const CallArgs& a) {
      a.expectAtMost(1, "join");
      const Value* items = a.get(0, "iterable");
      if (!items) typeError("join() takes one argument");
      std::string out;
      bool first = true;
      for (const Value& item : iterate(*items)) {
        if (!first) out += s;
        out += needString(item, "join");
        first = false;
      }
      return Value(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    return method(name, [s, name](const CallArgs&) {
      if (s.empty()) return Value(false);
      return Value(std::all_of(s.begin(), s.end(), [&](char c) {
        const bool digit = c >= '0' && c <= '9';
        const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (name == "isdigit") return digit;
        if (name == "isalpha") return alpha;
        if (name == "isalnum") return digit || alpha;
        return kWhitespace.find(c) != std::string_view::npos;
      }));
    });
  }
  return Value::undefined(name);
}

Value objectMethod(const Value& self, const std::string& name) {
  const Object& o = self.asObject();
  if (o.isNamespace) return Value::undefined(name);
  if (name == "items") {
    return method(name, [self](const CallArgs&) {
      Array out;
      for (const auto& [k, v] : self.asObject().items) out.push_back(Value::tuple(Array{k, v}));
      return Value(std::move(out));
    });
  }
  if (name == "keys") {
    return method(name, [self](const CallArgs&) {
      Array out;
      for (const auto& item : self.asObject().items) out.emplace_back(item.first);
      return Value(std::move(out));
    });
  }
  if (name == "values") {
    return method(name, [self](const CallArgs&) {
      Array out;
      for (const auto& item : self.asObject().items) out.push_back(item.second);
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return method(name, [self](const CallArgs& a) {
      a.expectAtMost(2, "get");
      const Value* key = a.get(0, "key");
      if (!key) typeError("get() takes a key");
      const Value* def = a.get(1, "default");
      if (const Value* v = self.asObject().lookup(*key)) return *v;
      return def ? *def : Value::none();
    });
  }
  if (name == "update" || name == "pop" || name == "setdefault" || name == "clear" ||
      name == "popitem") {
    return method(name, [name](const CallArgs&) -> Value {
      typeError(
          fmt::format("dict.{}() is not allowed: templates cannot modify a dict in place", name));
    });
  }
  return Value::undefined(name);
}

Value arrayMethod(const Value& self, const std::string& name) {
  if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
      name == "remove" || name == "sort" || name == "reverse" || name == "clear") {
    return method(name, [name](const CallArgs&) -> Value {
      typeError(
          fmt::format("list.{}() is not allowed: templates cannot modify a list in place", name));
    });
  }
  if (name == "index" || name == "count") {
    return method(name, [self, name](const CallArgs& a) {
      a.expectAtMost(1, name);
      const Value* x = a.get(0, "value");
      if (!x) typeError(name + "() takes one argument");
      const Array& items = self.asArray();
      int64_t n = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].equals(*x)) continue;
        if (name == "index") return Value(static_cast<int64_t>(i));
        ++n;
      }
      if (name == "index") typeError("value is not in list");
      return Value(n);
    });
  }
  return Value::undefined(name);
}

}  // namespace

using namespace detail;

Value getAttribute(const Value& object, const std::string& name) {
  failUndefined(object);
  switch (object.kind()) {
    case Value::Kind::kString:
      return stringMethod(object.asString(), name);
    case Value::Kind::kArray:
      return arrayMethod(object, name);
    case Value::Kind::kObject: {
      Value method = objectMethod(object, name);
      if (!method.isUndefined()) return method;
      const Value* v = object.asObject().find(name);
      return v ? *v : Value::undefined(name);
    }
    default:
      return Value::undefined(name);
  }
}

Value getItem(const Value& object, const Value& key) {
  failUndefined(object);
  switch (object.kind()) {
    case Value::Kind::kObject: {
      if (const Value* v = object.asObject().lookup(key)) return *v;
      if (!key.isString() || object.asObject().isNamespace) return Value::undefined(key.str());
      return objectMethod(object, key.asString());
    }
    case Value::Kind::kArray:
      if (key.isInt() || key.isBool()) {
        const size_t i = normalizeIndex(key.asInt(), object.asArray().size());
        return i == std::string::npos ? Value::undefined(key.str()) : object.asArray()[i];
      }
      return Value::undefined(key.str());
    case Value::Kind::kString:
      if (key.isInt() || key.isBool()) {
        const auto cps = splitCodepoints(object.asString());
        const size_t i = normalizeIndex(key.asInt(), cps.size());
        return i == std::string::npos ? Value::undefined(key.str()) : Value(cps[i]);
      }
      if (key.isString()) return stringMethod(object.asString(), key.asString());
      return Value::undefined(key.str());
    default:
      return Value::undefined(key.str());
  }
}

Value getSlice(const Value& object, const Value& start, const Value& stop, const Value& step) {
  failUndefined(object);
  const bool isString = object.isString();
  if (!isString && !object.isArray())
    typeError(fmt::format("cannot slice a {}", object.typeName()));
  const std::vector<std::string> cps =
      isString ? splitCodepoints(object.asString()) : std::vector<std::string>{};
  const int64_t n = static_cast<int64_t>(isString ? cps.size() : object.asArray().size());
  const int64_t s = step.isUndefined() || step.isNone() ? 1 : needInt(step, "slice");
  if (s == 0) typeError("slice step cannot be zero");
  // Python's slice.indices().
  auto clamp = [&](const Value& v, int64_t def) {
    if (v.isUndefined() || v.isNone()) return def;
    int64_t i = needInt(v, "slice");
    if (i < 0) i += n;
    if (s > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t begin = clamp(start, s > 0 ? 0 : n - 1);
  const int64_t end = clamp(stop, s > 0 ? n : -1);
  std::string outString;
  Array outArray;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) {
    if (isString) {
      outString += cps[static_cast<size_t>(i)];
    } else {
      outArray.push_back(object.asArray()[static_cast<size_t>(i)]);
    }
  }
  return isString ? Value(std::move(outString)) : Value(std::move(outArray));
}

Array iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kArray:
      return value.asArray();
    case Value::Kind::kObject: {
      Array keys;
      for (const auto& item : value.asObject().items) keys.push_back(item.first);
      return keys;
    }
    case Value::Kind::kString: {
      Array out;
      for (std::string& cp : splitCodepoints(value.asString())) out.emplace_back(std::move(cp));
      return out;
    }
    default:
      typeError(fmt::format("'{}' object is not iterable", value.typeName()));
  }
}

bool lessThan(const Value& a, const Value& b) {
  if (a.isNumber() && b.isNumber()) return a.asDouble() < b.asDouble();
  if (a.isString() && b.isString()) return a.asString() < b.asString();
  if (a.isArray() && b.isArray()) {
    const Array& x = a.asArray();
    const Array& y = b.asArray();
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      if (lessThan(x[i], y[i])) return true;
      if (lessThan(y[i], x[i])) return false;
    }
    return x.size() < y.size();
  }
  typeError(fmt::format("'<' not supported between instances of '{}' and '{}'", a.typeName(),
                        b.typeName()));
}

}  // namespace kvscope::jinja
