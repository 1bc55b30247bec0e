#pragma once
// Turns lexer tokens into statements, with jinja2's operator precedence:
//   cond-expr < or < and < not < comparisons (== != < <= > >= in, not in)
//   < + - < ~ < * / // % < ** < unary - + < postfix (.attr [i] (args))
//   followed by filters (|f) and tests (is t), which bind to the postfix term.
// Statements: if/elif/else, for (with `if` filter and else), set (also the
// block form and ns.attr targets), macro, filter blocks, break/continue (the
// loop-controls extension) and Hugging Face's {% generation %} marker, whose
// body renders in place. Unknown tags, filters and tests are errors here, at
// parse time, so a template that cannot render says so before any turn.

#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace kvscope::jinja {

// Throws TemplateError (with the line) on a syntax error.
Body parse(const std::vector<Token>& tokens);

}  // namespace kvscope::jinja
