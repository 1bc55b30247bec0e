#include "jinja/builtins.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace kvscope::jinja {
namespace {

constexpr std::string_view kWhitespace = " \t\n\r\v\f\x1c\x1d\x1e\x1f";
constexpr size_t kMaxRange = 1'000'000;  // range() larger than this is a hostile template

[[noreturn]] void typeError(const std::string& message) {
  throw TemplateError{message};
}

const std::string& needString(const Value& v, std::string_view what) {
  if (!v.isString()) typeError(fmt::format("{} expects a string, got {}", what, v.typeName()));
  return v.asString();
}

int64_t needInt(const Value& v, std::string_view what) {
  if (!v.isInt() && !v.isBool())
    typeError(fmt::format("{} expects an integer, got {}", what, v.typeName()));
  return v.asInt();
}

void failUndefined(const Value& v) {
  if (!v.isUndefined()) return;
  typeError(v.undefinedName().empty() ? std::string("a value is undefined")
                                      : fmt::format("'{}' is undefined", v.undefinedName()));
}

// ---- string helpers (Python str semantics) ---------------------------------

std::string strip(std::string_view s, std::string_view chars, bool left, bool right) {
  // chars are compared per code point so "▁" or "’" strip as one character.
  const std::vector<std::string> set = splitCodepoints(chars);
  const std::vector<std::string> cps = splitCodepoints(s);
  auto inSet = [&](const std::string& cp) {
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t begin = 0, end = cps.size();
  if (left) {
    while (begin < end && inSet(cps[begin])) ++begin;
  }
  if (right) {
    while (end > begin && inSet(cps[end - 1])) --end;
  }
  std::string out;
  for (size_t i = begin; i < end; ++i) out += cps[i];
  return out;
}

std::string stripArgs(const Value& input, const CallArgs& args, bool left, bool right,
                      std::string_view name) {
  args.expectAtMost(1, name);
  const Value* chars = args.get(0, "chars");
  const std::string_view set =
      chars && !chars->isNone() ? std::string_view(needString(*chars, name)) : kWhitespace;
  return strip(input.str(), set, left, right);
}

std::vector<std::string> splitWhitespace(std::string_view s, int64_t maxSplit) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    while (i < s.size() && kWhitespace.find(s[i]) != std::string_view::npos) ++i;
    if (i >= s.size()) break;
    if (maxSplit >= 0 && static_cast<int64_t>(out.size()) == maxSplit) {
      size_t end = s.size();
      while (end > i && kWhitespace.find(s[end - 1]) != std::string_view::npos) --end;
      out.emplace_back(s.substr(i, end - i));
      break;
    }
    size_t j = i;
    while (j < s.size() && kWhitespace.find(s[j]) == std::string_view::npos) ++j;
    out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

Array split(const std::string& s, const CallArgs& args, std::string_view name) {
  args.expectAtMost(2, name);
  const Value* sep = args.get(0, "sep");
  const Value* max = args.get(1, "maxsplit");
  const int64_t maxSplit = max ? needInt(*max, name) : -1;
  std::vector<std::string> parts;
  if (!sep || sep->isNone()) {
    parts = splitWhitespace(s, maxSplit);
  } else {
    const std::string& d = needString(*sep, name);
    if (d.empty()) typeError("split(): empty separator");
    size_t start = 0;
    while (true) {
      const size_t at = s.find(d, start);
      if (at == std::string::npos ||
          (maxSplit >= 0 && static_cast<int64_t>(parts.size()) == maxSplit)) {
        parts.push_back(s.substr(start));
        break;
      }
      parts.push_back(s.substr(start, at - start));
      start = at + d.size();
    }
  }
  Array out;
  for (std::string& p : parts) out.emplace_back(std::move(p));
  return out;
}

Array rsplit(const std::string& s, const CallArgs& args) {
  args.expectAtMost(2, "rsplit");
  const Value* sep = args.get(0, "sep");
  const Value* max = args.get(1, "maxsplit");
  const int64_t maxSplit = max ? needInt(*max, "rsplit") : -1;
  if (!sep || sep->isNone() || maxSplit < 0) return split(s, args, "rsplit");
  const std::string& d = needString(*sep, "rsplit");
  if (d.empty()) typeError("rsplit(): empty separator");
  std::vector<std::string> parts;
  size_t end = s.size();
  while (true) {
    const size_t at = end >= d.size() ? s.rfind(d, end - d.size()) : std::string::npos;
    if (at == std::string::npos || static_cast<int64_t>(parts.size()) == maxSplit) {
      parts.push_back(s.substr(0, end));
      break;
    }
    parts.push_back(s.substr(at + d.size(), end - at - d.size()));
    end = at;
  }
  Array out;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) out.emplace_back(std::move(*it));
  return out;
}

std::string replaceAll(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count) {
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    const std::vector<std::string> cps = splitCodepoints(s);
    for (const std::string& cp : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += cp;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  while (count < 0 || done < count) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    ++done;
  }
  out.append(s, start);
  return out;
}

char asciiUpper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
char asciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}
std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), asciiUpper);
  return s;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), asciiLower);
  return s;
}
std::string capitalize(const std::string& s) {
  std::string out = lower(s);
  if (!out.empty()) out[0] = asciiUpper(out[0]);
  return out;
}
std::string title(const std::string& s) {
  std::string out = s;
  bool startOfWord = true;
  for (char& c : out) {
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (letter) {
      c = startOfWord ? asciiUpper(c) : asciiLower(c);
      startOfWord = false;
    } else {
      startOfWord = !(c >= '0' && c <= '9') && static_cast<unsigned char>(c) < 0x80;
    }
  }
  return out;
}

bool startsOrEndsWith(const std::string& s, const Value& affix, bool start, std::string_view name) {
  auto test = [&](const Value& a) {
    const std::string& x = needString(a, name);
    return start ? s.starts_with(x) : s.ends_with(x);
  };
  if (affix.isArray()) {
    return std::any_of(affix.asArray().begin(), affix.asArray().end(), test);
  }
  return test(affix);
}

// Python's index into a sequence of `size` items; npos when out of range.
size_t normalizeIndex(int64_t index, size_t size) {
  if (index < 0) index += static_cast<int64_t>(size);
  if (index < 0 || index >= static_cast<int64_t>(size)) return std::string::npos;
  return static_cast<size_t>(index);
}

// ---- methods -----------------------------------------------------------------

Value method(std::string name, std::function<Value(const CallArgs&)> fn) {
  return Callable{std::move(name), std::move(fn)};
}

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

// ---- filters -----------------------------------------------------------------

const Value& needArg(const CallArgs& a, size_t index, std::string_view name,
                     std::string_view filter) {
  const Value* v = a.get(index, name);
  if (!v) typeError(fmt::format("{} needs its '{}' argument", filter, name));
  return *v;
}

Value attributePath(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (v.isUndefined()) return v;
    v = getItem(v, Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value filterLength(const Value& v, const CallArgs& a) {
  a.expectAtMost(0, "length");
  switch (v.kind()) {
    case Value::Kind::kString:
      return static_cast<int64_t>(codepointCount(v.asString()));
    case Value::Kind::kArray:
      return static_cast<int64_t>(v.asArray().size());
    case Value::Kind::kObject:
      return static_cast<int64_t>(v.asObject().items.size());
    case Value::Kind::kUndefined:
      return int64_t{0};
    default:
      typeError(fmt::format("object of type '{}' has no len()", v.typeName()));
  }
}

Value filterTojson(const Value& v, const CallArgs& a) {
  a.expectAtMost(5, "tojson");
  JsonStyle style;
  if (const Value* indent = a.get(0, "indent"); indent && !indent->isNone()) {
    style.indent =
        indent->isString()
            ? indent->asString()
            : std::string(static_cast<size_t>(std::max<int64_t>(0, needInt(*indent, "tojson"))),
                          ' ');
  }
  if (const Value* seps = a.get(1, "separators"); seps && !seps->isNone()) {
    if (!seps->isArray() || seps->asArray().size() != 2)
      typeError("tojson: separators must be a pair");
    style.itemSeparator = needString(seps->asArray()[0], "tojson");
    style.keySeparator = needString(seps->asArray()[1], "tojson");
  }
  if (const Value* sortKeys = a.get(2, "sort_keys")) style.sortKeys = sortKeys->truthy();
  if (const Value* ensureAscii = a.get(3, "ensure_ascii"); ensureAscii && ensureAscii->truthy()) {
    typeError("tojson: ensure_ascii=True is not supported");
  }
  return toJson(v, style);
}

Value filterJoin(const Value& v, const CallArgs& a) {
  a.expectAtMost(2, "join");
  const Value* sep = a.get(0, "d");
  const Value* attribute = a.get(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first && sep) out += sep->str();
    out += attribute ? attributePath(item, attribute->str()).str() : item.str();
    first = false;
  }
  return out;
}

// selectattr / rejectattr / select / reject share one loop.
Value filterSelect(const Value& v, const CallArgs& a, bool byAttribute, bool keep) {
  size_t next = 0;
  std::string attribute;
  if (byAttribute)
    attribute = needString(needArg(a, next++, "attribute", "selectattr"), "selectattr");
  const Value* testName = a.get(next, "test");
  TestFn test = nullptr;
  if (testName) {
    test = findTest(needString(*testName, "select"));
    if (!test) typeError(fmt::format("no test named '{}'", testName->str()));
  }
  CallArgs testArgs;
  for (size_t i = next + 1; i < a.positional.size(); ++i)
    testArgs.positional.push_back(a.positional[i]);
  Array out;
  for (const Value& item : iterate(v)) {
    const Value subject = byAttribute ? attributePath(item, attribute) : item;
    const bool pass = test ? test(subject, testArgs) : subject.truthy();
    if (pass == keep) out.push_back(item);
  }
  return out;
}

Value filterMap(const Value& v, const CallArgs& a) {
  Array out;
  if (const Value* attribute = a.get(99, "attribute")) {
    const Value* def = a.get(99, "default");
    for (const Value& item : iterate(v)) {
      Value x = attributePath(item, attribute->str());
      out.push_back(x.isUndefined() && def ? *def : x);
    }
    return out;
  }
  const std::string& name = needString(needArg(a, 0, "filter", "map"), "map");
  const FilterFn filter = findFilter(name);
  if (!filter) typeError(fmt::format("no filter named '{}'", name));
  CallArgs rest;
  for (size_t i = 1; i < a.positional.size(); ++i) rest.positional.push_back(a.positional[i]);
  rest.named = a.named;
  for (const Value& item : iterate(v)) out.push_back(filter(item, rest));
  return out;
}

Value filterDefault(const Value& v, const CallArgs& a) {
  a.expectAtMost(2, "default");
  const Value* def = a.get(0, "default_value");
  const Value* boolean = a.get(1, "boolean");
  const bool useDefault = v.isUndefined() || (boolean && boolean->truthy() && !v.truthy());
  if (!useDefault) return v;
  return def ? *def : Value(std::string());
}

Value filterFirstLast(const Value& v, bool first) {
  if (v.isString()) {
    const auto cps = splitCodepoints(v.asString());
    if (cps.empty()) return Value::undefined("first");
    return first ? cps.front() : cps.back();
  }
  const Array items = iterate(v);
  if (items.empty()) return Value::undefined(first ? "first" : "last");
  return first ? items.front() : items.back();
}

Value filterIndent(const Value& v, const CallArgs& a) {
  a.expectAtMost(3, "indent");
  const Value* width = a.get(0, "width");
  const Value* first = a.get(1, "first");
  const Value* blank = a.get(2, "blank");
  const std::string pad =
      width && width->isString()
          ? width->asString()
          : std::string(static_cast<size_t>(width ? needInt(*width, "indent") : 4), ' ');
  const std::string s = v.str();
  std::string out;
  size_t start = 0;
  bool firstLine = true;
  while (true) {
    const size_t nl = s.find('\n', start);
    const std::string line =
        s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    const bool doPad =
        firstLine ? (first && first->truthy()) : (!line.empty() || (blank && blank->truthy()));
    if (doPad) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    firstLine = false;
  }
  return out;
}

Value filterItems(const Value& v, const CallArgs& a) {
  a.expectAtMost(0, "items");
  if (v.isUndefined()) return Array{};
  if (!v.isObject()) typeError(fmt::format("items filter expects a dict, got {}", v.typeName()));
  return getAttribute(v, "items").asCallable().call(CallArgs{});
}

Value filterList(const Value& v, const CallArgs&) {
  if (v.isString()) {
    Array out;
    for (std::string& cp : splitCodepoints(v.asString())) out.emplace_back(std::move(cp));
    return out;
  }
  return iterate(v);
}

Value sortedValues(const Value& v, const CallArgs& a) {
  const Value* reverse = a.get(0, "reverse");
  const Value* attribute = a.get(2, "attribute");
  Array items = iterate(v);
  auto key = [&](const Value& x) { return attribute ? attributePath(x, attribute->str()) : x; };
  std::stable_sort(items.begin(), items.end(),
                   [&](const Value& x, const Value& y) { return lessThan(key(x), key(y)); });
  if (reverse && reverse->truthy()) std::reverse(items.begin(), items.end());
  return items;
}

Value filterUnique(const Value& v, const CallArgs&) {
  Array out;
  for (const Value& item : iterate(v)) {
    if (std::none_of(out.begin(), out.end(), [&](const Value& x) { return x.equals(item); }))
      out.push_back(item);
  }
  return out;
}

Value filterMinMax(const Value& v, bool min) {
  const Array items = iterate(v);
  if (items.empty()) return Value::undefined(min ? "min" : "max");
  Value best = items.front();
  for (const Value& x : items) {
    if (min ? lessThan(x, best) : lessThan(best, x)) best = x;
  }
  return best;
}

Value filterReplace(const Value& v, const CallArgs& a) {
  a.expectAtMost(3, "replace");
  const Value& from = needArg(a, 0, "old", "replace");
  const Value& to = needArg(a, 1, "new", "replace");
  const Value* count = a.get(2, "count");
  return replaceAll(v.str(), from.str(), to.str(),
                    count && !count->isNone() ? needInt(*count, "replace") : -1);
}

Value filterInt(const Value& v, const CallArgs& a) {
  const Value* def = a.get(0, "default");
  const Value fallback = def ? *def : Value(int64_t{0});
  if (v.isInt() || v.isBool()) return v.asInt();
  if (v.isFloat()) return static_cast<int64_t>(v.asDouble());
  if (v.isString()) {
    try {
      size_t used = 0;
      const std::string t = strip(v.asString(), kWhitespace, true, true);
      const int64_t x = std::stoll(t, &used);
      if (used == t.size()) return x;
      const double d = std::stod(t, &used);
      if (used == t.size()) return static_cast<int64_t>(d);
    } catch (const std::exception&) {
    }
  }
  return fallback;
}

Value filterFloat(const Value& v, const CallArgs& a) {
  const Value* def = a.get(0, "default");
  if (v.isNumber()) return v.asDouble();
  if (v.isString()) {
    try {
      size_t used = 0;
      const std::string t = strip(v.asString(), kWhitespace, true, true);
      const double d = std::stod(t, &used);
      if (used == t.size()) return d;
    } catch (const std::exception&) {
    }
  }
  return def ? *def : Value(0.0);
}

Value filterRound(const Value& v, const CallArgs& a) {
  const Value* precision = a.get(0, "precision");
  const Value* method = a.get(1, "method");
  const double scale =
      std::pow(10.0, precision ? static_cast<double>(needInt(*precision, "round")) : 0.0);
  const std::string how = method ? method->str() : "common";
  const double x = v.asDouble() * scale;
  // Python's round(): halves go to the even neighbour.
  const double r = how == "ceil"    ? std::ceil(x)
                   : how == "floor" ? std::floor(x)
                                    : std::nearbyint(x);
  return r / scale;
}

Value filterEscape(const Value& v, const CallArgs&) {
  std::string out;
  for (const char c : v.str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value filterDictsort(const Value& v, const CallArgs& a) {
  if (!v.isObject()) typeError("dictsort expects a dict");
  const Value* byValue = a.get(1, "by");
  const Value* reverse = a.get(2, "reverse");
  const bool value = byValue && byValue->str() == "value";
  Array items = getAttribute(v, "items").asCallable().call(CallArgs{}).asArray();
  std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
    return lessThan(x.asArray()[value ? 1 : 0], y.asArray()[value ? 1 : 0]);
  });
  if (reverse && reverse->truthy()) std::reverse(items.begin(), items.end());
  return items;
}

Value filterSum(const Value& v, const CallArgs& a) {
  const Value* attribute = a.get(0, "attribute");
  const Value* start = a.get(1, "start");
  Value total = start ? *start : Value(int64_t{0});
  for (const Value& item : iterate(v)) {
    const Value x = attribute ? attributePath(item, attribute->str()) : item;
    if (total.isFloat() || x.isFloat()) {
      total = total.asDouble() + x.asDouble();
    } else {
      total = total.asInt() + x.asInt();
    }
  }
  return total;
}

Value filterWordcount(const Value& v, const CallArgs&) {
  return static_cast<int64_t>(splitWhitespace(v.str(), -1).size());
}

Value filterCenter(const Value& v, const CallArgs& a) {
  const Value* width = a.get(0, "width");
  const std::string s = v.str();
  const size_t w = static_cast<size_t>(width ? needInt(*width, "center") : 80);
  const size_t n = codepointCount(s);
  if (n >= w) return s;
  const size_t left = (w - n) / 2 + ((w - n) % 2 & w % 2);
  return std::string(left, ' ') + s + std::string(w - n - left, ' ');
}

Value filterBatch(const Value& v, const CallArgs& a) {
  const int64_t size = needInt(needArg(a, 0, "linecount", "batch"), "batch");
  if (size <= 0) typeError("batch size must be positive");
  Array out, current;
  for (const Value& item : iterate(v)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) {
      out.emplace_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) out.emplace_back(std::move(current));
  return out;
}

Value filterAttr(const Value& v, const CallArgs& a) {
  return getAttribute(v, needArg(a, 0, "name", "attr").str());
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const std::map<std::string, FilterFn, std::less<>> table = {
      {"abs",
       [](const Value& v, const CallArgs&) {
         return v.isFloat() ? Value(std::fabs(v.asDouble()))
                            : Value(v.asInt() < 0 ? -v.asInt() : v.asInt());
       }},
      {"attr", filterAttr},
      {"batch", filterBatch},
      {"capitalize", [](const Value& v, const CallArgs&) { return Value(capitalize(v.str())); }},
      {"center", filterCenter},
      {"count", filterLength},
      {"d", filterDefault},
      {"default", filterDefault},
      {"dictsort", filterDictsort},
      {"e", filterEscape},
      {"escape", filterEscape},
      {"first", [](const Value& v, const CallArgs&) { return filterFirstLast(v, true); }},
      {"float", filterFloat},
      {"forceescape", filterEscape},
      {"indent", filterIndent},
      {"int", filterInt},
      {"items", filterItems},
      {"join", filterJoin},
      {"last", [](const Value& v, const CallArgs&) { return filterFirstLast(v, false); }},
      {"length", filterLength},
      {"list", filterList},
      {"lower", [](const Value& v, const CallArgs&) { return Value(lower(v.str())); }},
      {"map", filterMap},
      {"max", [](const Value& v, const CallArgs&) { return filterMinMax(v, false); }},
      {"min", [](const Value& v, const CallArgs&) { return filterMinMax(v, true); }},
      {"reject",
       [](const Value& v, const CallArgs& a) { return filterSelect(v, a, false, false); }},
      {"rejectattr",
       [](const Value& v, const CallArgs& a) { return filterSelect(v, a, true, false); }},
      {"replace", filterReplace},
      {"reverse",
       [](const Value& v, const CallArgs&) {
         if (v.isString()) {
           auto cps = splitCodepoints(v.asString());
           std::string out;
           for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
           return Value(std::move(out));
         }
         Array items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value(std::move(items));
       }},
      {"round", filterRound},
      {"safe", [](const Value& v, const CallArgs&) { return v; }},
      {"select", [](const Value& v, const CallArgs& a) { return filterSelect(v, a, false, true); }},
      {"selectattr",
       [](const Value& v, const CallArgs& a) { return filterSelect(v, a, true, true); }},
      {"sort", sortedValues},
      {"string", [](const Value& v, const CallArgs&) { return Value(v.str()); }},
      {"sum", filterSum},
      {"title", [](const Value& v, const CallArgs&) { return Value(title(v.str())); }},
      {"tojson", filterTojson},
      {"trim", [](const Value& v,
                  const CallArgs& a) { return Value(stripArgs(v, a, true, true, "trim")); }},
      {"unique", filterUnique},
      {"upper", [](const Value& v, const CallArgs&) { return Value(upper(v.str())); }},
      {"wordcount", filterWordcount},
  };
  return table;
}

// ---- tests -------------------------------------------------------------------

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const std::map<std::string, TestFn, std::less<>> table = {
      {"boolean", [](const Value& v, const CallArgs&) { return v.isBool(); }},
      {"callable", [](const Value& v, const CallArgs&) { return v.isCallable(); }},
      {"defined", [](const Value& v, const CallArgs&) { return !v.isUndefined(); }},
      {"divisibleby",
       [](const Value& v, const CallArgs& a) {
         const int64_t d = needInt(needArg(a, 0, "num", "divisibleby"), "divisibleby");
         return d != 0 && v.asInt() % d == 0;
       }},
      {"eq",
       [](const Value& v, const CallArgs& a) { return v.equals(needArg(a, 0, "other", "eq")); }},
      {"equalto", [](const Value& v,
                     const CallArgs& a) { return v.equals(needArg(a, 0, "other", "equalto")); }},
      {"==",
       [](const Value& v, const CallArgs& a) { return v.equals(needArg(a, 0, "other", "==")); }},
      {"ne",
       [](const Value& v, const CallArgs& a) { return !v.equals(needArg(a, 0, "other", "ne")); }},
      {"!=",
       [](const Value& v, const CallArgs& a) { return !v.equals(needArg(a, 0, "other", "!=")); }},
      {"lt",
       [](const Value& v, const CallArgs& a) { return lessThan(v, needArg(a, 0, "other", "lt")); }},
      {"lessthan",
       [](const Value& v, const CallArgs& a) { return lessThan(v, needArg(a, 0, "other", "lt")); }},
      {"gt",
       [](const Value& v, const CallArgs& a) { return lessThan(needArg(a, 0, "other", "gt"), v); }},
      {"greaterthan",
       [](const Value& v, const CallArgs& a) { return lessThan(needArg(a, 0, "other", "gt"), v); }},
      {"le", [](const Value& v,
                const CallArgs& a) { return !lessThan(needArg(a, 0, "other", "le"), v); }},
      {"ge", [](const Value& v,
                const CallArgs& a) { return !lessThan(v, needArg(a, 0, "other", "ge")); }},
      {"even", [](const Value& v, const CallArgs&) { return v.asInt() % 2 == 0; }},
      {"odd", [](const Value& v, const CallArgs&) { return v.asInt() % 2 != 0; }},
      {"false", [](const Value& v, const CallArgs&) { return v.isBool() && !v.asBool(); }},
      {"true", [](const Value& v, const CallArgs&) { return v.isBool() && v.asBool(); }},
      {"float", [](const Value& v, const CallArgs&) { return v.isFloat(); }},
      {"integer", [](const Value& v, const CallArgs&) { return v.isInt(); }},
      {"in",
       [](const Value& v, const CallArgs& a) {
         const Value& seq = needArg(a, 0, "seq", "in");
         if (seq.isString())
           return v.isString() && seq.asString().find(v.asString()) != std::string::npos;
         for (const Value& x : iterate(seq)) {
           if (x.equals(v)) return true;
         }
         return false;
       }},
      {"iterable",
       [](const Value& v, const CallArgs&) { return v.isString() || v.isArray() || v.isObject(); }},
      {"lower",
       [](const Value& v, const CallArgs&) {
         return v.isString() && lower(v.asString()) == v.asString();
       }},
      {"upper",
       [](const Value& v, const CallArgs&) {
         return v.isString() && upper(v.asString()) == v.asString();
       }},
      {"mapping",
       [](const Value& v, const CallArgs&) { return v.isObject() && !v.asObject().isNamespace; }},
      {"none", [](const Value& v, const CallArgs&) { return v.isNone(); }},
      {"number", [](const Value& v, const CallArgs&) { return v.isNumber(); }},
      {"sameas",
       [](const Value& v, const CallArgs& a) {
         const Value& other = needArg(a, 0, "other", "sameas");
         if (v.kind() != other.kind()) return false;
         if (v.isNone() || v.isBool()) return v.equals(other);
         return false;
       }},
      {"sequence",
       [](const Value& v, const CallArgs&) { return v.isString() || v.isArray() || v.isObject(); }},
      {"string", [](const Value& v, const CallArgs&) { return v.isString(); }},
      {"undefined", [](const Value& v, const CallArgs&) { return v.isUndefined(); }},
  };
  return table;
}

}  // namespace

FilterFn findFilter(std::string_view name) {
  const auto& table = filters();
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

TestFn findTest(std::string_view name) {
  const auto& table = tests();
  const auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

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
