#pragma once
// What the built-ins (filters.cpp, methods.cpp, globals.cpp) share: argument
// checks that throw jinja2's TypeError-like TemplateError, and Python's str
// operations on UTF-8 (characters are code points, case mapping is ASCII as
// the templates need it). Internal to engine/jinja.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace kvscope::jinja::detail {

// Python's str.isspace() set for ASCII, what strip() and split() drop.
inline constexpr std::string_view kWhitespace = " \t\n\r\v\f\x1c\x1d\x1e\x1f";

// ---- Argument checks --------------------------------------------------------

[[noreturn]] void typeError(const std::string& message);
// `v` as a string / an integer (bools count, as in Python); `what` names the
// caller in the error.
const std::string& needString(const Value& v, std::string_view what);
int64_t needInt(const Value& v, std::string_view what);
// Throws "'NAME' is undefined" when `v` is undefined.
void failUndefined(const Value& v);
// The argument at `index` or named `name`; throws when absent.
const Value& needArg(const CallArgs& a, size_t index, std::string_view name,
                     std::string_view filter);
// A callable value named `name`, for bound methods and globals.
Value method(std::string name, std::function<Value(const CallArgs&)> fn);

// ---- Python str operations --------------------------------------------------

// str.strip/lstrip/rstrip with `chars` compared per code point.
std::string strip(std::string_view s, std::string_view chars, bool left, bool right);
// The same, taking the optional `chars` argument from `args`.
std::string stripArgs(const Value& input, const CallArgs& args, bool left, bool right,
                      std::string_view name);
// str.split() without a separator: runs of whitespace, at most `maxSplit`
// splits (-1: no limit).
std::vector<std::string> splitWhitespace(std::string_view s, int64_t maxSplit);
// str.split(sep=None, maxsplit=-1) and str.rsplit(…) with `args` as passed.
Array split(const std::string& s, const CallArgs& args, std::string_view name);
Array rsplit(const std::string& s, const CallArgs& args);
// str.replace(from, to, count); count < 0 replaces every occurrence.
std::string replaceAll(const std::string& s, const std::string& from, const std::string& to,
                       int64_t count);
std::string upper(std::string s);
std::string lower(std::string s);
std::string capitalize(const std::string& s);
std::string title(const std::string& s);
// str.startswith / str.endswith; `affix` may be a tuple (list) of strings.
bool startsOrEndsWith(const std::string& s, const Value& affix, bool start, std::string_view name);
// Python's index into a sequence of `size` items (negative from the end);
// npos when out of range.
size_t normalizeIndex(int64_t index, size_t size);

}  // namespace kvscope::jinja::detail
