#include "jinja/parser.h"

#include <charconv>
#include <initializer_list>

#include <fmt/format.h>

#include "jinja/builtins.h"

namespace kvscope::jinja {
namespace {

template <typename Node>
ExprPtr makeExpr(int line, Node node) {
  auto e = std::make_unique<Expr>();
  e->line = line;
  e->node = std::move(node);
  return e;
}

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : m_tokens(tokens) {}

  Body parseTemplate() {
    std::string endTag;
    Body body = parseBody({}, endTag);
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    const size_t i = std::min(m_pos + ahead, m_tokens.size() - 1);
    return m_tokens[i];
  }
  const Token& next() {
    const Token& t = peek();
    if (m_pos < m_tokens.size() - 1) ++m_pos;
    return t;
  }
  [[noreturn]] void fail(const std::string& message) const {
    throw TemplateError{message, peek().line};
  }
  bool isOp(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kOperator && peek(ahead).text == op;
  }
  bool isName(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kName && peek(ahead).text == name;
  }
  bool acceptOp(std::string_view op) {
    if (!isOp(op)) return false;
    next();
    return true;
  }
  bool acceptName(std::string_view name) {
    if (!isName(name)) return false;
    next();
    return true;
  }
  void expectOp(std::string_view op) {
    if (!acceptOp(op)) fail(fmt::format("expected '{}', found {}", op, describe(peek())));
  }
  void expectName(std::string_view name) {
    if (!acceptName(name)) fail(fmt::format("expected '{}', found {}", name, describe(peek())));
  }
  std::string expectIdentifier() {
    if (peek().kind != TokenKind::kName)
      fail(fmt::format("expected a name, found {}", describe(peek())));
    return next().text;
  }
  void expectBlockEnd() {
    if (peek().kind != TokenKind::kBlockEnd) {
      fail(fmt::format("expected '%}}', found {}", describe(peek())));
    }
    next();
  }
  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::kEnd:
        return "the end of the template";
      case TokenKind::kBlockEnd:
        return "'%}'";
      case TokenKind::kVarEnd:
        return "'}}'";
      case TokenKind::kText:
        return "text";
      default:
        return "'" + t.text + "'";
    }
  }

  // Parses statements until one of `endTags` opens a block tag; that tag's
  // name is left in `endTag` with the tokens after it unread.
  Body parseBody(std::initializer_list<std::string_view> endTags, std::string& endTag) {
    const DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.kind == TokenKind::kEnd) {
        if (endTags.size() != 0) {
          // The last tag listed is the block's closing one (endfor, endif, …).
          fail(fmt::format("unexpected end of template: missing {{% {} %}}", *(endTags.end() - 1)));
        }
        endTag.clear();
        return body;
      }
      if (t.kind == TokenKind::kText) {
        body.push_back(Stmt{t.line, TextStmt{t.text}});
        next();
      } else if (t.kind == TokenKind::kVarBegin) {
        next();
        const int line = peek().line;
        ExprPtr e = parseExpression();
        if (peek().kind != TokenKind::kVarEnd)
          fail(fmt::format("expected '}}}}', found {}", describe(peek())));
        next();
        body.push_back(Stmt{line, OutputStmt{std::move(e)}});
      } else if (t.kind == TokenKind::kBlockBegin) {
        next();
        const Token& tag = peek();
        if (tag.kind != TokenKind::kName)
          fail(fmt::format("expected a tag name, found {}", describe(tag)));
        for (const std::string_view end : endTags) {
          if (tag.text == end) {
            endTag = tag.text;
            next();
            return body;
          }
        }
        parseTag(body);
      } else {
        fail(fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  void parseTag(Body& body) {
    const Token tag = next();
    const int line = tag.line;
    if (tag.text == "if") {
      body.push_back(Stmt{line, parseIf()});
    } else if (tag.text == "for") {
      body.push_back(Stmt{line, parseFor()});
    } else if (tag.text == "set") {
      body.push_back(Stmt{line, parseSet()});
    } else if (tag.text == "macro") {
      body.push_back(Stmt{line, parseMacro()});
    } else if (tag.text == "filter") {
      body.push_back(Stmt{line, parseFilterBlock()});
    } else if (tag.text == "break" || tag.text == "continue") {
      if (m_loopDepth == 0) fail(fmt::format("'{}' outside a for loop", tag.text));
      expectBlockEnd();
      if (tag.text == "break") {
        body.push_back(Stmt{line, BreakStmt{}});
      } else {
        body.push_back(Stmt{line, ContinueStmt{}});
      }
    } else if (tag.text == "generation") {
      // Hugging Face's marker for the assistant's tokens: renders its body.
      expectBlockEnd();
      std::string endTag;
      Body inner = parseBody({"endgeneration"}, endTag);
      expectBlockEnd();
      for (Stmt& s : inner) body.push_back(std::move(s));
    } else {
      throw TemplateError{fmt::format("unknown tag '{}'", tag.text), line};
    }
  }

  IfStmt parseIf() {
    IfStmt stmt;
    ExprPtr cond = parseExpression();
    expectBlockEnd();
    while (true) {
      std::string endTag;
      Body body = parseBody({"elif", "else", "endif"}, endTag);
      stmt.branches.emplace_back(std::move(cond), std::move(body));
      if (endTag == "elif") {
        cond = parseExpression();
        expectBlockEnd();
        continue;
      }
      expectBlockEnd();
      if (endTag == "else") {
        stmt.otherwise = parseBody({"endif"}, endTag);
        expectBlockEnd();
      }
      return stmt;
    }
  }

  Target parseTarget(bool allowAttribute) {
    Target target;
    target.names.push_back(expectIdentifier());
    if (allowAttribute && acceptOp(".")) {
      target.attribute = expectIdentifier();
      return target;
    }
    while (acceptOp(",")) {
      if (peek().kind != TokenKind::kName) break;  // trailing comma
      target.names.push_back(expectIdentifier());
    }
    return target;
  }

  ForStmt parseFor() {
    ForStmt stmt;
    stmt.target = parseTarget(false);
    expectName("in");
    stmt.iterable = parseTuple(/*allowCondition=*/false);
    if (acceptName("if")) stmt.condition = parseExpression();
    if (isName("recursive")) fail("recursive for loops are not supported");
    expectBlockEnd();
    ++m_loopDepth;
    std::string endTag;
    stmt.body = parseBody({"else", "endfor"}, endTag);
    --m_loopDepth;
    expectBlockEnd();
    if (endTag == "else") {
      stmt.otherwise = parseBody({"endfor"}, endTag);
      expectBlockEnd();
    }
    return stmt;
  }

  SetStmt parseSet() {
    SetStmt stmt;
    stmt.target = parseTarget(true);
    if (acceptOp("=")) {
      stmt.value = parseTuple(true);
      expectBlockEnd();
      return stmt;
    }
    if (stmt.target.names.size() != 1 || !stmt.target.attribute.empty()) {
      fail("a block {% set %} assigns one name");
    }
    expectBlockEnd();
    std::string endTag;
    stmt.body = parseBody({"endset"}, endTag);
    expectBlockEnd();
    return stmt;
  }

  MacroStmt parseMacro() {
    MacroStmt stmt;
    stmt.name = expectIdentifier();
    expectOp("(");
    while (!acceptOp(")")) {
      if (!stmt.params.empty()) expectOp(",");
      if (acceptOp(")")) break;
      std::string param = expectIdentifier();
      ExprPtr defaultValue;
      if (acceptOp("=")) defaultValue = parseExpression();
      stmt.params.emplace_back(std::move(param), std::move(defaultValue));
    }
    expectBlockEnd();
    const int savedLoopDepth = m_loopDepth;
    m_loopDepth = 0;  // break/continue cannot cross a macro
    std::string endTag;
    stmt.body = std::make_shared<const Body>(parseBody({"endmacro"}, endTag));
    m_loopDepth = savedLoopDepth;
    expectBlockEnd();
    return stmt;
  }

  FilterBlockStmt parseFilterBlock() {
    FilterBlockStmt stmt;
    stmt.name = expectIdentifier();
    if (!findFilter(stmt.name)) fail(fmt::format("no filter named '{}'", stmt.name));
    if (isOp("(")) stmt.args = parseCallArgs();
    expectBlockEnd();
    std::string endTag;
    stmt.body = parseBody({"endfilter"}, endTag);
    expectBlockEnd();
    return stmt;
  }

  // An expression, or several separated by commas (a tuple, as in
  // `{% set a, b = 1, 2 %}`).
  ExprPtr parseTuple(bool allowCondition) {
    const int line = peek().line;
    ExprPtr first = allowCondition ? parseExpression() : parseOr();
    if (!isOp(",")) return first;
    ListExpr list;
    list.tuple = true;
    list.items.push_back(std::move(first));
    while (acceptOp(",")) {
      if (peek().kind == TokenKind::kBlockEnd || isName("if")) break;
      list.items.push_back(allowCondition ? parseExpression() : parseOr());
    }
    return makeExpr(line, std::move(list));
  }

  // Hostile nesting ("((((…", "not not not …") must not overflow the stack.
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : parser(p) {
      if (++parser.m_depth > kMaxDepth) parser.fail("expression nested too deeply");
    }
    ~DepthGuard() { --parser.m_depth; }
    Parser& parser;
  };
  static constexpr int kMaxDepth = 200;

  ExprPtr parseExpression() {
    const DepthGuard guard(*this);
    const int line = peek().line;
    ExprPtr e = parseOr();
    while (acceptName("if")) {
      CondExpr cond;
      cond.then = std::move(e);
      cond.cond = parseOr();
      if (acceptName("else")) cond.otherwise = parseExpression();
      e = makeExpr(line, std::move(cond));
    }
    return e;
  }

  ExprPtr binary(int line, BinaryOp op, ExprPtr lhs, ExprPtr rhs) {
    return makeExpr(line, BinaryExpr{op, std::move(lhs), std::move(rhs)});
  }

  ExprPtr parseOr() {
    const int line = peek().line;
    ExprPtr e = parseAnd();
    while (acceptName("or")) e = binary(line, BinaryOp::kOr, std::move(e), parseAnd());
    return e;
  }

  ExprPtr parseAnd() {
    const int line = peek().line;
    ExprPtr e = parseNot();
    while (acceptName("and")) e = binary(line, BinaryOp::kAnd, std::move(e), parseNot());
    return e;
  }

  ExprPtr parseNot() {
    const DepthGuard guard(*this);
    const int line = peek().line;
    if (acceptName("not")) return makeExpr(line, UnaryExpr{UnaryOp::kNot, parseNot()});
    return parseCompare();
  }

  ExprPtr parseCompare() {
    const int line = peek().line;
    ExprPtr e = parseMath1();
    while (true) {
      BinaryOp op;
      if (acceptOp("==")) {
        op = BinaryOp::kEq;
      } else if (acceptOp("!=")) {
        op = BinaryOp::kNe;
      } else if (acceptOp("<")) {
        op = BinaryOp::kLt;
      } else if (acceptOp("<=")) {
        op = BinaryOp::kLe;
      } else if (acceptOp(">")) {
        op = BinaryOp::kGt;
      } else if (acceptOp(">=")) {
        op = BinaryOp::kGe;
      } else if (acceptName("in")) {
        op = BinaryOp::kIn;
      } else if (isName("not") && isName("in", 1)) {
        next();
        next();
        op = BinaryOp::kNotIn;
      } else {
        return e;
      }
      e = binary(line, op, std::move(e), parseMath1());
    }
  }

  ExprPtr parseMath1() {
    const int line = peek().line;
    ExprPtr e = parseConcat();
    while (true) {
      if (acceptOp("+")) {
        e = binary(line, BinaryOp::kAdd, std::move(e), parseConcat());
      } else if (acceptOp("-")) {
        e = binary(line, BinaryOp::kSub, std::move(e), parseConcat());
      } else {
        return e;
      }
    }
  }

  ExprPtr parseConcat() {
    const int line = peek().line;
    ExprPtr e = parseMath2();
    while (acceptOp("~")) e = binary(line, BinaryOp::kConcat, std::move(e), parseMath2());
    return e;
  }

  ExprPtr parseMath2() {
    const int line = peek().line;
    ExprPtr e = parsePow();
    while (true) {
      BinaryOp op;
      if (acceptOp("*")) {
        op = BinaryOp::kMul;
      } else if (acceptOp("/")) {
        op = BinaryOp::kDiv;
      } else if (acceptOp("//")) {
        op = BinaryOp::kFloorDiv;
      } else if (acceptOp("%")) {
        op = BinaryOp::kMod;
      } else {
        return e;
      }
      e = binary(line, op, std::move(e), parsePow());
    }
  }

  ExprPtr parsePow() {
    const int line = peek().line;
    ExprPtr e = parseUnary(true);
    while (acceptOp("**")) e = binary(line, BinaryOp::kPow, std::move(e), parseUnary(true));
    return e;
  }

  ExprPtr parseUnary(bool withFilter) {
    const DepthGuard guard(*this);
    const int line = peek().line;
    ExprPtr e;
    if (acceptOp("-")) {
      e = makeExpr(line, UnaryExpr{UnaryOp::kNeg, parseUnary(false)});
    } else if (acceptOp("+")) {
      e = makeExpr(line, UnaryExpr{UnaryOp::kPos, parseUnary(false)});
    } else {
      e = parsePostfix(parsePrimary());
    }
    return withFilter ? parseFiltersAndTests(std::move(e)) : std::move(e);
  }

  ExprPtr parsePrimary() {
    const Token& t = peek();
    const int line = t.line;
    switch (t.kind) {
      case TokenKind::kName: {
        const std::string name = next().text;
        if (name == "true" || name == "True") return makeExpr(line, Literal{true});
        if (name == "false" || name == "False") return makeExpr(line, Literal{false});
        if (name == "none" || name == "None") return makeExpr(line, Literal{Value::none()});
        return makeExpr(line, Name{name});
      }
      case TokenKind::kString: {
        std::string s = next().text;
        while (peek().kind == TokenKind::kString) s += next().text;  // "a" "b" joins
        return makeExpr(line, Literal{Value(std::move(s))});
      }
      case TokenKind::kInt: {
        const std::string& text = next().text;
        int64_t v = 0;
        const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
        if (r.ec != std::errc()) throw TemplateError{"integer literal out of range", line};
        return makeExpr(line, Literal{Value(v)});
      }
      case TokenKind::kFloat:
        return makeExpr(line, Literal{Value(std::stod(next().text))});
      case TokenKind::kOperator:
        if (acceptOp("(")) {
          if (acceptOp(")")) return makeExpr(line, ListExpr{{}, true});
          ExprPtr e = parseExpression();
          if (isOp(",")) {
            ListExpr tuple;
            tuple.tuple = true;
            tuple.items.push_back(std::move(e));
            while (acceptOp(",")) {
              if (isOp(")")) break;
              tuple.items.push_back(parseExpression());
            }
            e = makeExpr(line, std::move(tuple));
          }
          expectOp(")");
          return e;
        }
        if (acceptOp("[")) {
          ListExpr list;
          while (!acceptOp("]")) {
            if (!list.items.empty()) expectOp(",");
            if (acceptOp("]")) break;
            list.items.push_back(parseExpression());
          }
          return makeExpr(line, std::move(list));
        }
        if (acceptOp("{")) {
          DictExpr dict;
          while (!acceptOp("}")) {
            if (!dict.items.empty()) expectOp(",");
            if (acceptOp("}")) break;
            ExprPtr key = parseExpression();
            expectOp(":");
            dict.items.emplace_back(std::move(key), parseExpression());
          }
          return makeExpr(line, std::move(dict));
        }
        break;
      default:
        break;
    }
    fail(fmt::format("unexpected {}", describe(t)));
  }

  ExprPtr parsePostfix(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (acceptOp(".")) {
        if (peek().kind == TokenKind::kInt) {
          e = makeExpr(line,
                       GetItem{std::move(e), makeExpr(line, Literal{Value(static_cast<int64_t>(
                                                                std::stoll(next().text)))})});
        } else {
          e = makeExpr(line, GetAttr{std::move(e), expectIdentifier()});
        }
      } else if (acceptOp("[")) {
        ExprPtr start, stop, step;
        bool slice = false;
        if (!isOp(":")) start = parseExpression();
        if (acceptOp(":")) {
          slice = true;
          if (!isOp(":") && !isOp("]")) stop = parseExpression();
          if (acceptOp(":") && !isOp("]")) step = parseExpression();
        }
        expectOp("]");
        if (slice) {
          e = makeExpr(line,
                       SliceExpr{std::move(e), std::move(start), std::move(stop), std::move(step)});
        } else {
          e = makeExpr(line, GetItem{std::move(e), std::move(start)});
        }
      } else if (isOp("(")) {
        e = makeExpr(line, CallExpr{std::move(e), parseCallArgs()});
      } else {
        return e;
      }
    }
  }

  Arguments parseCallArgs() {
    Arguments args;
    expectOp("(");
    while (!acceptOp(")")) {
      if (!args.positional.empty() || !args.named.empty()) expectOp(",");
      if (acceptOp(")")) break;
      if (peek().kind == TokenKind::kName && isOp("=", 1)) {
        std::string name = next().text;
        next();
        args.named.emplace_back(std::move(name), parseExpression());
      } else {
        if (!args.named.empty()) fail("positional argument follows keyword argument");
        args.positional.push_back(parseExpression());
      }
    }
    return args;
  }

  ExprPtr parseFiltersAndTests(ExprPtr e) {
    while (true) {
      const int line = peek().line;
      if (acceptOp("|")) {
        FilterExpr f;
        f.name = expectIdentifier();
        if (!findFilter(f.name))
          throw TemplateError{fmt::format("no filter named '{}'", f.name), line};
        if (isOp("(")) f.args = parseCallArgs();
        f.input = std::move(e);
        e = makeExpr(line, std::move(f));
        e = parsePostfix(std::move(e));
      } else if (acceptName("is")) {
        TestExpr t;
        t.negated = acceptName("not");
        t.name = expectIdentifier();
        if (!findTest(t.name)) throw TemplateError{fmt::format("no test named '{}'", t.name), line};
        if (isOp("(")) {
          t.args = parseCallArgs();
        } else if (startsTestArgument()) {
          t.args.positional.push_back(parseUnary(false));
        }
        t.input = std::move(e);
        e = makeExpr(line, std::move(t));
      } else {
        return e;
      }
    }
  }

  // `x is divisibleby 3`: a test may take one argument without parentheses.
  bool startsTestArgument() const {
    const Token& t = peek();
    switch (t.kind) {
      case TokenKind::kString:
      case TokenKind::kInt:
      case TokenKind::kFloat:
        return true;
      case TokenKind::kName:
        return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "if" &&
               t.text != "is" && t.text != "in" && t.text != "not";
      case TokenKind::kOperator:
        return t.text == "[" || t.text == "{" || t.text == "-";
      default:
        return false;
    }
  }

  const std::vector<Token>& m_tokens;
  size_t m_pos = 0;
  int m_loopDepth = 0;
  int m_depth = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) {
  return Parser(tokens).parseTemplate();
}

}  // namespace kvscope::jinja
