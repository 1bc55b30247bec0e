#include "jinja/template.h"

#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "jinja/ast.h"
#include "jinja/builtins.h"
#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace kvscope::jinja {
namespace {

enum class Flow { kNormal, kBreak, kContinue };

using Frame = std::unordered_map<std::string, Value>;

// Walks the statement tree. Scopes follow jinja2: {% set %} writes the
// innermost scope; a for loop opens a scope that ends with it (what a template
// sets inside a loop is gone after it — hence namespace()); a macro sees the
// globals and the template's top-level names, plus its parameters.
class Interpreter {
 public:
  Interpreter(const Object& variables, const std::tm& now, const RenderLimits& limits)
      : m_limits(limits) {
    for (const auto& [k, v] : makeGlobals(now).items) m_globals[k.asString()] = v;
    for (const auto& [k, v] : variables.items) m_globals[k.str()] = v;
    m_frames.push_back(&m_globals);
    m_frames.push_back(&m_topLevel);
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

  int line() const { return m_line; }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw TemplateError{message, m_line}; }

  void step(int line) {
    m_line = line;
    if (++m_steps > m_limits.maxSteps) fail("the template takes too many steps to render");
  }

  void append(std::string& out, std::string_view text) const {
    out += text;
    if (out.size() > m_limits.maxOutputBytes) fail("the template's output is too large");
  }

  Value lookup(const std::string& name) const {
    for (auto it = m_frames.rbegin(); it != m_frames.rend(); ++it) {
      const auto found = (*it)->find(name);
      if (found != (*it)->end()) return found->second;
    }
    return Value::undefined(name);
  }

  // ---- statements --------------------------------------------------------------

  Flow exec(const Body& body, std::string& out) {
    for (const Stmt& stmt : body) {
      step(stmt.line);
      const Flow flow =
          std::visit([&](const auto& node) { return execNode(node, out); }, stmt.node);
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow execNode(const TextStmt& s, std::string& out) {
    append(out, s.text);
    return Flow::kNormal;
  }

  Flow execNode(const OutputStmt& s, std::string& out) {
    append(out, eval(*s.expr).str());
    return Flow::kNormal;
  }

  Flow execNode(const IfStmt& s, std::string& out) {
    for (const auto& [cond, body] : s.branches) {
      if (eval(*cond).truthy()) return exec(body, out);
    }
    return exec(s.otherwise, out);
  }

  void assign(const Target& target, const Value& value) {
    Frame& frame = *m_frames.back();
    if (!target.attribute.empty()) {
      const Value ns = lookup(target.names[0]);
      if (!ns.isObject() || !ns.asObject().isNamespace) {
        fail(fmt::format("cannot assign attribute on non-namespace object '{}'", target.names[0]));
      }
      // Nothing chains through assignments, so no loop can build an unbounded
      // chain of namespaces or captured values (jinja::Value::holdsReference).
      if (value.holdsReference()) {
        fail(fmt::format("'{}.{}' cannot hold a namespace or a function", target.names[0],
                         target.attribute));
      }
      ns.mutableObject().set(target.attribute, value);
      return;
    }
    if (target.names.size() == 1) {
      frame[target.names[0]] = value;
      return;
    }
    const Array items = iterate(value);
    if (items.size() != target.names.size()) {
      fail(fmt::format("cannot unpack {} values into {} names", items.size(), target.names.size()));
    }
    for (size_t i = 0; i < items.size(); ++i) frame[target.names[i]] = items[i];
  }

  Flow execNode(const SetStmt& s, std::string&) {
    if (s.value) {
      assign(s.target, eval(*s.value));
    } else {
      std::string captured;
      exec(s.body, captured);
      assign(s.target, Value(std::move(captured)));
    }
    return Flow::kNormal;
  }

  static Value loopObject(const Array& items, size_t i) {
    const auto n = static_cast<int64_t>(items.size());
    const auto index = static_cast<int64_t>(i);
    Object loop;
    loop.set("index", index + 1);
    loop.set("index0", index);
    loop.set("revindex", n - index);
    loop.set("revindex0", n - index - 1);
    loop.set("first", i == 0);
    loop.set("last", index == n - 1);
    loop.set("length", n);
    loop.set("depth", int64_t{1});
    loop.set("depth0", int64_t{0});
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("previtem"));
    loop.set("nextitem", index + 1 < n ? items[i + 1] : Value::undefined("nextitem"));
    loop.set("cycle", Callable{"cycle", [i](const CallArgs& a) {
                                 if (a.positional.empty())
                                   throw TemplateError{"loop.cycle() needs values"};
                                 return a.positional[i % a.positional.size()];
                               }});
    return loop;
  }

  Flow execNode(const ForStmt& s, std::string& out) {
    const Value iterable = eval(*s.iterable);
    Array items = iterate(iterable);
    Frame frame;
    m_frames.push_back(&frame);
    if (s.condition) {
      Array kept;
      for (const Value& item : items) {
        step(m_line);  // an iteration is a step even when its body is empty
        assign(s.target, item);
        if (eval(*s.condition).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      step(m_line);
      frame.clear();  // jinja2: what one iteration sets is gone in the next
      assign(s.target, items[i]);
      frame["loop"] = loopObject(items, i);
      if (exec(s.body, out) == Flow::kBreak) break;
    }
    m_frames.pop_back();
    if (items.empty()) return exec(s.otherwise, out);
    return Flow::kNormal;
  }

  Flow execNode(const MacroStmt& s, std::string&) {
    const MacroStmt* macro = &s;
    (*m_frames.back())[s.name] =
        Callable{s.name, [this, macro](const CallArgs& a) { return callMacro(*macro, a); }};
    return Flow::kNormal;
  }

  Value callMacro(const MacroStmt& macro, const CallArgs& args) {
    if (m_callDepth >= m_limits.maxCallDepth) fail("macros call each other too deeply");
    if (args.positional.size() > macro.params.size()) {
      fail(fmt::format("macro '{}' takes at most {} arguments", macro.name, macro.params.size()));
    }
    Frame frame;
    std::vector<Frame*> saved = {&m_globals, &m_topLevel, &frame};
    std::swap(saved, m_frames);
    ++m_callDepth;
    std::string out;
    try {
      for (size_t i = 0; i < macro.params.size(); ++i) {
        const auto& [name, defaultValue] = macro.params[i];
        if (const Value* v = args.get(i, name)) {
          frame[name] = *v;
        } else {
          frame[name] = defaultValue ? eval(*defaultValue) : Value::undefined(name);
        }
      }
      for (const auto& [name, v] : args.named) {
        bool known = false;
        for (const auto& param : macro.params) known = known || param.first == name;
        if (!known) fail(fmt::format("macro '{}' has no parameter named '{}'", macro.name, name));
      }
      exec(*macro.body, out);
    } catch (...) {
      std::swap(saved, m_frames);
      --m_callDepth;
      throw;
    }
    std::swap(saved, m_frames);
    --m_callDepth;
    return out;
  }

  Flow execNode(const FilterBlockStmt& s, std::string& out) {
    std::string captured;
    exec(s.body, captured);
    append(out, findFilter(s.name)(Value(std::move(captured)), evalArgs(s.args)).str());
    return Flow::kNormal;
  }

  Flow execNode(const BreakStmt&, std::string&) { return Flow::kBreak; }
  Flow execNode(const ContinueStmt&, std::string&) { return Flow::kContinue; }

  // ---- expressions -------------------------------------------------------------

  Value eval(const Expr& e) {
    step(e.line);
    return std::visit([&](const auto& node) { return evalNode(node); }, e.node);
  }

  CallArgs evalArgs(const Arguments& args) {
    CallArgs out;
    for (const ExprPtr& a : args.positional) out.positional.push_back(eval(*a));
    for (const auto& [name, a] : args.named) out.named.emplace_back(name, eval(*a));
    return out;
  }

  Value evalNode(const Literal& n) { return n.value; }
  Value evalNode(const Name& n) { return lookup(n.name); }

  Value evalNode(const ListExpr& n) {
    Array items;
    for (const ExprPtr& item : n.items) items.push_back(eval(*item));
    return n.tuple ? Value::tuple(std::move(items)) : Value(std::move(items));
  }

  Value evalNode(const DictExpr& n) {
    Object o;
    for (const auto& [k, v] : n.items) {
      const Value key = eval(*k);
      if (!key.isString() && !key.isNumber() && !key.isNone()) {
        fail(fmt::format("unhashable type: '{}'", key.typeName()));
      }
      o.set(key, eval(*v));
    }
    return o;
  }

  Value evalNode(const GetAttr& n) { return getAttribute(eval(*n.object), n.name); }
  Value evalNode(const GetItem& n) {
    const Value object = eval(*n.object);
    return getItem(object, eval(*n.index));
  }
  Value evalNode(const SliceExpr& n) {
    const Value object = eval(*n.object);
    const Value start = n.start ? eval(*n.start) : Value::none();
    const Value stop = n.stop ? eval(*n.stop) : Value::none();
    const Value stride = n.step ? eval(*n.step) : Value::none();
    return getSlice(object, start, stop, stride);
  }

  Value evalNode(const CallExpr& n) {
    const Value callee = eval(*n.callee);
    CallArgs args = evalArgs(n.args);
    if (callee.isUndefined()) {
      fail(callee.undefinedName().empty()
               ? std::string("called an undefined value")
               : fmt::format("'{}' is undefined", callee.undefinedName()));
    }
    if (!callee.isCallable()) fail(fmt::format("'{}' object is not callable", callee.typeName()));
    return callee.asCallable().call(args);
  }

  Value evalNode(const FilterExpr& n) {
    const Value input = eval(*n.input);
    return findFilter(n.name)(input, evalArgs(n.args));
  }

  Value evalNode(const TestExpr& n) {
    const Value input = eval(*n.input);
    const bool result = findTest(n.name)(input, evalArgs(n.args));
    return n.negated ? !result : result;
  }

  Value evalNode(const UnaryExpr& n) {
    const Value v = eval(*n.operand);
    switch (n.op) {
      case UnaryOp::kNot:
        return !v.truthy();
      case UnaryOp::kNeg:
        if (v.isFloat()) return -v.asDouble();
        if (v.isNumber()) return -v.asInt();
        fail(fmt::format("bad operand type for unary -: '{}'", v.typeName()));
      case UnaryOp::kPos:
        if (!v.isNumber()) fail(fmt::format("bad operand type for unary +: '{}'", v.typeName()));
        return v;
    }
    return v;
  }

  Value evalNode(const CondExpr& n) {
    if (eval(*n.cond).truthy()) return eval(*n.then);
    return n.otherwise ? eval(*n.otherwise) : Value::undefined();
  }

  [[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) const {
    if (a.isUndefined() || b.isUndefined()) {
      const Value& u = a.isUndefined() ? a : b;
      fail(u.undefinedName().empty() ? std::string("an undefined value was used")
                                     : fmt::format("'{}' is undefined", u.undefinedName()));
    }
    fail(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, a.typeName(),
                     b.typeName()));
  }

  bool contains(const Value& haystack, const Value& needle) const {
    switch (haystack.kind()) {
      case Value::Kind::kString:
        if (!needle.isString())
          fail(fmt::format("'in <string>' requires string as left operand, not {}",
                           needle.typeName()));
        return haystack.asString().find(needle.asString()) != std::string::npos;
      case Value::Kind::kArray:
        for (const Value& x : haystack.asArray()) {
          if (x.equals(needle)) return true;
        }
        return false;
      case Value::Kind::kObject:
        return haystack.asObject().lookup(needle) != nullptr;
      case Value::Kind::kUndefined:
        return false;
      default:
        fail(fmt::format("argument of type '{}' is not iterable", haystack.typeName()));
    }
  }

  Value arithmetic(BinaryOp op, const Value& a, const Value& b) const {
    static constexpr const char* kNames[] = {"", "",  "",  "",  "",  "",  "",   "",  "",
                                             "", "+", "-", "~", "*", "/", "//", "%", "**"};
    const char* name = kNames[static_cast<int>(op)];
    if (op == BinaryOp::kAdd) {
      if (a.isString() && b.isString()) return a.asString() + b.asString();
      if (a.isArray() && b.isArray()) {
        Array items = a.asArray();
        items.insert(items.end(), b.asArray().begin(), b.asArray().end());
        return items;
      }
    }
    if (op == BinaryOp::kMul && (a.isString() || b.isString()) && (a.isInt() || b.isInt())) {
      const std::string& s = a.isString() ? a.asString() : b.asString();
      const int64_t times = a.isInt() ? a.asInt() : b.asInt();
      if (times > 0 && s.size() * static_cast<size_t>(times) > m_limits.maxOutputBytes) {
        fail("string repetition too large");
      }
      std::string out;
      for (int64_t i = 0; i < times; ++i) out += s;
      return out;
    }
    if (!a.isNumber() || !b.isNumber()) unsupported(name, a, b);
    const bool useFloat = a.isFloat() || b.isFloat();
    const double x = a.asDouble(), y = b.asDouble();
    const int64_t i = a.asInt(), j = b.asInt();
    switch (op) {
      case BinaryOp::kAdd:
        return useFloat ? Value(x + y) : Value(i + j);
      case BinaryOp::kSub:
        return useFloat ? Value(x - y) : Value(i - j);
      case BinaryOp::kMul:
        return useFloat ? Value(x * y) : Value(i * j);
      case BinaryOp::kDiv:
        if (y == 0) fail("division by zero");
        return x / y;
      case BinaryOp::kFloorDiv:
        if (y == 0) fail("integer division or modulo by zero");
        if (useFloat) return std::floor(x / y);
        return Value(i / j - ((i % j != 0 && ((i < 0) != (j < 0))) ? 1 : 0));
      case BinaryOp::kMod:
        if (y == 0) fail("integer division or modulo by zero");
        if (useFloat) return x - y * std::floor(x / y);
        return Value(((i % j) + j) % j);
      case BinaryOp::kPow:
        if (!useFloat && j >= 0) {
          int64_t r = 1;
          for (int64_t k = 0; k < j && k < 64; ++k) r *= i;
          return r;
        }
        return std::pow(x, y);
      default:
        unsupported(name, a, b);
    }
  }

  Value evalNode(const BinaryExpr& n) {
    if (n.op == BinaryOp::kAnd) {
      Value a = eval(*n.lhs);
      return a.truthy() ? eval(*n.rhs) : a;
    }
    if (n.op == BinaryOp::kOr) {
      Value a = eval(*n.lhs);
      return a.truthy() ? a : eval(*n.rhs);
    }
    const Value a = eval(*n.lhs);
    const Value b = eval(*n.rhs);
    switch (n.op) {
      case BinaryOp::kEq:
        return a.equals(b);
      case BinaryOp::kNe:
        return !a.equals(b);
      case BinaryOp::kLt:
        return lessThan(a, b);
      case BinaryOp::kGt:
        return lessThan(b, a);
      case BinaryOp::kLe:
        return !lessThan(b, a);
      case BinaryOp::kGe:
        return !lessThan(a, b);
      case BinaryOp::kIn:
        return contains(b, a);
      case BinaryOp::kNotIn:
        return !contains(b, a);
      case BinaryOp::kConcat:
        return a.str() + b.str();
      default:
        return arithmetic(n.op, a, b);
    }
  }

  const RenderLimits& m_limits;
  Frame m_globals;
  Frame m_topLevel;
  std::vector<Frame*> m_frames;
  int m_line = 0;
  size_t m_steps = 0;
  int m_callDepth = 0;
};

Error templateError(const TemplateError& e) {
  if (e.raisedByTemplate) {
    return makeError(ErrorCode::kInvalidArgument,
                     "line {}: the template refused the conversation: {}", e.line, e.message);
  }
  return makeError(ErrorCode::kInvalidArgument, "line {}: {}", e.line, e.message);
}

}  // namespace

Expected<Template> Template::parse(std::string_view source) {
  try {
    Template t;
    t.m_body = std::make_shared<const Body>(jinja::parse(tokenize(source)));
    return t;
  } catch (const TemplateError& e) {
    return templateError(e);
  }
}

Expected<std::string> Template::render(const Object& variables, const std::tm& now,
                                       const RenderLimits& limits) const {
  Interpreter interpreter(variables, now, limits);
  try {
    return interpreter.run(*m_body);
  } catch (TemplateError& e) {
    if (e.line == 0) e.line = interpreter.line();
    return templateError(e);
  } catch (const std::bad_alloc&) {
    return makeError(ErrorCode::kOutOfMemory, "line {}: out of memory rendering the template",
                     interpreter.line());
  }
}

std::tm localTimeNow() {
  const std::time_t t = std::time(nullptr);
  std::tm out{};
  localtime_r(&t, &out);
  return out;
}

}  // namespace kvscope::jinja
