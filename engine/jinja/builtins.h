#pragma once
// jinja2's built-in filters, tests and globals, and the Python methods chat
// templates call on strings, lists and dicts (content.strip(), message.get(…),
// tools.items()). Behaviour follows Python and jinja2 3.1 in Hugging Face's
// sandbox: lists and dicts cannot be modified in place (list.append is an
// error there too), and tojson is Hugging Face's json.dumps with
// ensure_ascii off.

#include <ctime>
#include <string>
#include <string_view>

#include "jinja/value.h"

namespace kvscope::jinja {

using FilterFn = Value (*)(const Value& input, const CallArgs& args);
using TestFn = bool (*)(const Value& input, const CallArgs& args);

// nullptr when jinja2 has no such filter / test.
FilterFn findFilter(std::string_view name);
TestFn findTest(std::string_view name);

// object.name: a method bound to the object (str, list and dict methods), or
// the dict's item, as jinja2's getattr does; undefined when neither exists.
// Throws when `object` is undefined.
Value getAttribute(const Value& object, const std::string& name);
// object[key]: a dict item, a list/str index (negative from the end); undefined
// when missing. Throws when `object` is undefined.
Value getItem(const Value& object, const Value& key);
// object[start:stop:step] for lists and strings (None parts use the defaults).
Value getSlice(const Value& object, const Value& start, const Value& stop, const Value& step);

// The global functions templates may call: range, dict, namespace,
// raise_exception (throws a TemplateError with raisedByTemplate set) and
// strftime_now (formats `now`).
Object makeGlobals(const std::tm& now);

// Iterates as Python's `for x in value` does: list items, dict keys, string
// characters; undefined gives nothing; anything else (none, numbers) is an
// error, as in Python.
Array iterate(const Value& value);

// Python's < for numbers, strings and lists; throws for other types.
bool lessThan(const Value& a, const Value& b);

}  // namespace kvscope::jinja
