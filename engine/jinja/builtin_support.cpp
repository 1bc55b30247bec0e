#include "jinja/builtin_support.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvscope::jinja::detail {

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

Value method(std::string name, std::function<Value(const CallArgs&)> fn) {
  return Callable{std::move(name), std::move(fn)};
}

const Value& needArg(const CallArgs& a, size_t index, std::string_view name,
                     std::string_view filter) {
  const Value* v = a.get(index, name);
  if (!v) typeError(fmt::format("{} needs its '{}' argument", filter, name));
  return *v;
}

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

namespace {

char asciiUpper(char c) {
  return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
}
char asciiLower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

}  // namespace
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

}  // namespace kvscope::jinja::detail
