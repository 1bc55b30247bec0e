// jinja2's built-in filters and tests (builtins.h).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "jinja/builtin_support.h"
#include "jinja/builtins.h"

namespace kvscope::jinja {
namespace {

using namespace detail;

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

}  // namespace kvscope::jinja
