#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

namespace kvscope::jinja {

const Value* Object::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.isString() && k.asString() == key) return &v;
  }
  return nullptr;
}

const Value* Object::lookup(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (k.equals(key)) return &v;
  }
  return nullptr;
}

void Object::set(const Value& key, Value value) {
  for (auto& [k, v] : items) {
    if (k.equals(key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : named) {
    if (k == name) return &v;
  }
  return nullptr;
}

void CallArgs::expectAtMost(size_t count, std::string_view function) const {
  if (positional.size() + named.size() > count) {
    throw TemplateError{
        fmt::format("{}() takes at most {} argument{}", function, count, count == 1 ? "" : "s")};
  }
}

Value Value::undefined(std::string name) {
  Value v;
  v.m_v = Undefined{std::move(name)};
  return v;
}

Value::Value(Array a) {
  for (const Value& item : a) {
    m_depth = std::max(m_depth, item.m_depth);
    m_holdsReference |= item.m_holdsReference;
  }
  if (++m_depth > kMaxValueDepth)
    throw TemplateError{fmt::format("a list nested deeper than {} levels", kMaxValueDepth)};
  m_v = std::make_shared<Array>(std::move(a));
}

Value::Value(Object o) {
  m_holdsReference = o.isNamespace;
  for (const auto& [key, item] : o.items) {
    m_depth = std::max({m_depth, key.m_depth, item.m_depth});
    m_holdsReference |= key.m_holdsReference || item.m_holdsReference;
  }
  if (++m_depth > kMaxValueDepth)
    throw TemplateError{fmt::format("a dict nested deeper than {} levels", kMaxValueDepth)};
  m_v = std::make_shared<Object>(std::move(o));
}

Value Value::tuple(Array items) {
  Value v(std::move(items));
  v.m_tuple = true;
  return v;
}

Value Value::none() {
  Value v;
  v.m_v = nullptr;
  return v;
}

namespace {

Value fromJsonAt(const nlohmann::ordered_json& json, size_t depth) {
  if (depth > kMaxJsonDepth)
    throw TemplateError{fmt::format("JSON nested deeper than {} levels", kMaxJsonDepth)};
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return json.get<bool>();
    case nlohmann::ordered_json::value_t::number_integer:
      return json.get<int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned:
      return static_cast<int64_t>(json.get<uint64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return json.get<double>();
    case nlohmann::ordered_json::value_t::string:
      return json.get<std::string>();
    case nlohmann::ordered_json::value_t::array: {
      Array items;
      for (const auto& item : json) items.push_back(fromJsonAt(item, depth + 1));
      return items;
    }
    case nlohmann::ordered_json::value_t::object: {
      Object object;
      for (const auto& [key, item] : json.items())
        object.set(Value(key), fromJsonAt(item, depth + 1));
      return object;
    }
    default:
      return Value::none();
  }
}

}  // namespace

Value Value::fromJson(const nlohmann::ordered_json& json) {
  return fromJsonAt(json, 0);
}

int64_t Value::asInt() const {
  if (isBool()) return asBool() ? 1 : 0;
  if (isFloat()) return static_cast<int64_t>(std::get<double>(m_v));
  return std::get<int64_t>(m_v);
}

double Value::asDouble() const {
  if (isFloat()) return std::get<double>(m_v);
  return static_cast<double>(asInt());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return asBool();
    case Kind::kInt:
      return asInt() != 0;
    case Kind::kFloat:
      return asDouble() != 0.0;
    case Kind::kString:
      return !asString().empty();
    case Kind::kArray:
      return !asArray().empty();
    case Kind::kObject:
      return asObject().isNamespace || !asObject().items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string formatFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // The shortest digits that round-trip, laid out as Python's repr lays them:
  // positional for exponents -4..15, scientific ("1e+16", "1.5e-05") otherwise.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string sci(buf, result.ptr);
  const size_t e = sci.find('e');
  std::string mantissa = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  const bool negative = mantissa[0] == '-';
  if (negative) mantissa.erase(0, 1);
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out.append("0.").append(static_cast<size_t>(-exponent - 1), '0').append(digits);
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out.append(digits)
          .append(static_cast<size_t>(exponent) + 1 - digits.size(), '0')
          .append(".0");
    } else {
      const size_t point = static_cast<size_t>(exponent) + 1;
      out.append(digits, 0, point).append(".").append(digits, point);
    }
    return out;
  }
  out.append(digits, 0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);
  out += fmt::format("e{}{:02d}", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out;
}

namespace {

// Python's repr() of a str: single quotes unless the text has one and no
// double quote; backslash escapes for quotes, backslashes and control bytes.
std::string reprString(const std::string& s) {
  const bool useDouble = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = useDouble ? '"' : '\'';
  std::string out(1, quote);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == quote || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\r') {
      out += "\\r";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  out += quote;
  return out;
}

void appendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

// json.dumps's text for a dict key: strings as they are, numbers and
// constants as their JSON text.
std::string jsonKey(const Value& key) {
  if (key.isString()) return key.asString();
  if (key.isBool()) return key.asBool() ? "true" : "false";
  if (key.isNone()) return "null";
  if (key.isInt() || key.isFloat()) return key.str();
  throw TemplateError{
      fmt::format("tojson: keys must be str, int, float, bool or None, not {}", key.typeName())};
}

void appendJson(std::string& out, const Value& value, const JsonStyle& style, int depth) {
  if (depth > 512) throw TemplateError{"tojson: value nested too deeply"};
  const std::string& itemSep =
      !style.itemSeparator.empty() ? style.itemSeparator : (style.indent ? "," : ", ");
  const std::string& keySep = !style.keySeparator.empty() ? style.keySeparator : ": ";
  auto newline = [&](int level) {
    if (!style.indent) return;
    out += '\n';
    for (int i = 0; i < level; ++i) out += *style.indent;
  };
  switch (value.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += value.asBool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(value.asInt());
      return;
    case Value::Kind::kFloat: {
      const double d = value.asDouble();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : formatFloat(d);
      return;
    }
    case Value::Kind::kString:
      appendJsonString(out, value.asString());
      return;
    case Value::Kind::kArray: {
      const Array& items = value.asArray();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += itemSep;
        newline(depth + 1);
        appendJson(out, items[i], style, depth + 1);
      }
      newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kObject: {
      std::vector<std::pair<std::string, const Value*>> items;
      for (const auto& [k, v] : value.asObject().items) items.emplace_back(jsonKey(k), &v);
      if (style.sortKeys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += itemSep;
        newline(depth + 1);
        appendJsonString(out, items[i].first);
        out += keySep;
        appendJson(out, *items[i].second, style, depth + 1);
      }
      newline(depth);
      out += '}';
      return;
    }
    case Value::Kind::kUndefined:
    case Value::Kind::kCallable:
      throw TemplateError{
          fmt::format("tojson: Object of type {} is not JSON serializable", value.typeName())};
  }
}

}  // namespace

std::string Value::str() const {
  switch (kind()) {
    case Kind::kUndefined:
      return {};
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return asBool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(asInt());
    case Kind::kFloat:
      return formatFloat(asDouble());
    case Kind::kString:
      return asString();
    case Kind::kArray:
    case Kind::kObject:
    case Kind::kCallable:
      return repr();
  }
  return {};
}

std::string Value::repr() const {
  switch (kind()) {
    case Kind::kString:
      return reprString(asString());
    case Kind::kArray: {
      std::string out = m_tuple ? "(" : "[";
      const Array& items = asArray();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += items[i].repr();
      }
      if (m_tuple && items.size() == 1) out += ",";
      return out + (m_tuple ? ")" : "]");
    }
    case Kind::kObject: {
      const Object& o = asObject();
      if (o.isNamespace) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < o.items.size(); ++i) {
        if (i) out += ", ";
        out += o.items[i].first.repr() + ": " + o.items[i].second.repr();
      }
      return out + "}";
    }
    case Kind::kCallable:
      return "<function " + asCallable().name + ">";
    default:
      return str();
  }
}

bool Value::equals(const Value& other) const {
  if (isNumber() && other.isNumber()) {
    if (isFloat() || other.isFloat()) return asDouble() == other.asDouble();
    return asInt() == other.asInt();
  }
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return asString() == other.asString();
    case Kind::kArray: {
      const Array& a = asArray();
      const Array& b = other.asArray();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!a[i].equals(b[i])) return false;
      }
      return true;
    }
    case Kind::kObject: {
      const Object& a = asObject();
      const Object& b = other.asObject();
      if (a.isNamespace || b.isNamespace) return &a == &b;
      if (a.items.size() != b.items.size()) return false;
      for (const auto& [key, v] : a.items) {
        const Value* w = b.lookup(key);
        if (!w || !v.equals(*w)) return false;
      }
      return true;
    }
    case Kind::kCallable:
      return &asCallable() == &other.asCallable();
    default:
      return false;
  }
}

std::string_view Value::typeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kArray:
      return "list";
    case Kind::kObject:
      return asObject().isNamespace ? "Namespace" : "dict";
    case Kind::kCallable:
      return "function";
  }
  return "?";
}

std::string toJson(const Value& value, const JsonStyle& style) {
  std::string out;
  appendJson(out, value, style, 0);
  return out;
}

size_t codepointCount(std::string_view s) {
  size_t n = 0;
  for (const char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

std::vector<std::string> splitCodepoints(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t j = i + 1;
    while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
    out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace kvscope::jinja
