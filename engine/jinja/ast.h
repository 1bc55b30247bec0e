#pragma once
// The parsed form of a template: statements holding expressions. Every node
// keeps the line it started on, for error messages.

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "jinja/value.h"

namespace kvscope::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Literal {
  Value value;
};
struct Name {
  std::string name;
};
struct ListExpr {  // [a, b], or the tuple (a, b)
  std::vector<ExprPtr> items;
  bool tuple = false;
};
struct DictExpr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct GetAttr {  // object.name
  ExprPtr object;
  std::string name;
};
struct GetItem {  // object[index]
  ExprPtr object;
  ExprPtr index;
};
struct SliceExpr {  // object[start:stop:step], each part optional
  ExprPtr object, start, stop, step;
};
struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> named;
};
struct CallExpr {
  ExprPtr callee;
  Arguments args;
};
struct FilterExpr {  // input | name(args)
  ExprPtr input;
  std::string name;
  Arguments args;
};
struct TestExpr {  // input is [not] name(args)
  ExprPtr input;
  std::string name;
  Arguments args;
  bool negated = false;
};
enum class UnaryOp { kNot, kNeg, kPos };
struct UnaryExpr {
  UnaryOp op;
  ExprPtr operand;
};
enum class BinaryOp {
  kOr,
  kAnd,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  kIn,
  kNotIn,
  kAdd,
  kSub,
  kConcat,
  kMul,
  kDiv,
  kFloorDiv,
  kMod,
  kPow,
};
struct BinaryExpr {
  BinaryOp op;
  ExprPtr lhs, rhs;
};
struct CondExpr {  // then if cond else otherwise (otherwise may be absent)
  ExprPtr cond, then, otherwise;
};

struct Expr {
  int line = 0;
  std::variant<Literal, Name, ListExpr, DictExpr, GetAttr, GetItem, SliceExpr, CallExpr, FilterExpr,
               TestExpr, UnaryExpr, BinaryExpr, CondExpr>
      node;
};

struct Stmt;
using Body = std::vector<Stmt>;

// What {% set … %} and {% for … %} assign to: one name, several names
// unpacked from a sequence, or an attribute of a namespace (ns.attr).
struct Target {
  std::vector<std::string> names;
  std::string attribute;  // non-empty: names[0].attribute
};

struct TextStmt {
  std::string text;
};
struct OutputStmt {  // {{ expr }}
  ExprPtr expr;
};
struct IfStmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if and each elif
  Body otherwise;
};
struct ForStmt {
  Target target;
  ExprPtr iterable;
  ExprPtr condition;  // for x in xs if condition; may be null
  Body body;
  Body otherwise;  // {% else %}: runs when nothing was iterated
};
struct SetStmt {
  Target target;
  ExprPtr value;  // null for a block set
  Body body;      // {% set x %}…{% endset %}
};
struct MacroStmt {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  std::shared_ptr<const Body> body;                     // shared with the macro values it creates
};
struct FilterBlockStmt {  // {% filter name(args) %}…{% endfilter %}
  std::string name;
  Arguments args;
  Body body;
};
struct BreakStmt {};
struct ContinueStmt {};

struct Stmt {
  int line = 0;
  std::variant<TextStmt, OutputStmt, IfStmt, ForStmt, SetStmt, MacroStmt, FilterBlockStmt,
               BreakStmt, ContinueStmt>
      node;
};

}  // namespace kvscope::jinja
