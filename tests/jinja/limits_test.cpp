// Templates come from model files, so a hostile one must end in an error, not
// a crash: values nested past kMaxValueDepth (built in a loop, where nothing
// else bounds them), namespaces chained through assignments, JSON input past
// kMaxJsonDepth, runaway macros and loops. Each case would overflow the stack
// or run for minutes without its bound.
#include <ctime>
#include <string>

#include <gtest/gtest.h>

#include "jinja/template.h"

namespace kvscope::jinja {
namespace {

Expected<std::string> render(const std::string& source, const RenderLimits& limits = {}) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.error();
  return t->render(Object{}, std::tm{}, limits);
}

void expectError(const std::string& source, const std::string& what,
                 const RenderLimits& limits = {}) {
  const auto out = render(source, limits);
  ASSERT_FALSE(out.ok()) << source;
  EXPECT_NE(out.error().message.find(what), std::string::npos) << out.error().message;
}

TEST(JinjaLimits, AListNestedInALoopStopsAtTheDepthBound) {
  expectError(
      "{% set ns = namespace(x=[]) %}{% for i in range(200000) %}{% set ns.x = [ns.x] %}"
      "{% endfor %}{{ ns.x }}",
      "a list nested deeper than 256 levels");
  expectError(
      "{% set ns = namespace(x={}) %}{% for i in range(1000) %}{% set ns.x = {'a': ns.x} %}"
      "{% endfor %}",
      "a dict nested deeper than 256 levels");
  // 255 levels inside the namespace's attribute still render and print.
  const auto ok = render(
      "{% set ns = namespace(x=[]) %}{% for i in range(255) %}{% set ns.x = [ns.x] %}"
      "{% endfor %}{{ ns.x | length }}{{ ns.x | tojson | length }}");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(*ok, "1512");  // 256 '[' and 256 ']'
}

TEST(JinjaLimits, NamespacesDoNotChainThroughAssignments) {
  // A linked list of namespaces, one node per iteration, kept through ns.prev:
  // freeing 100,000 nodes would recurse 100,000 levels.
  expectError(
      "{% set ns = namespace(prev=none) %}{% for i in range(100000) %}"
      "{% set ns.prev = namespace(next=ns.prev) %}{% endfor %}",
      "'ns.prev' cannot hold a namespace");
  expectError("{% set a = namespace() %}{% set b = namespace() %}{% set a.x = [b] %}",
              "'a.x' cannot hold a namespace");
  // A bound method captures its object: chaining through one is refused too.
  expectError(
      "{% set ns = namespace(c=none) %}{% for i in range(100000) %}"
      "{% set ns.c = {'p': ns.c}.items %}{% endfor %}",
      "'ns.c' cannot hold a namespace or a function");
  // Values without namespaces may be stored, and namespaces may be built
  // around namespaces (bounded like lists).
  const auto ok = render(
      "{% set a = namespace(n=0) %}{% set b = namespace(inner=a, items=[1, [2]]) %}"
      "{% set a.n = [b.items, 3] %}{{ b.inner.n }}");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(*ok, "[[1, [2]], 3]");
}

TEST(JinjaLimits, RunawayMacrosAndLoopsEnd) {
  expectError("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
              "macros call each other too deeply");
  // 10^10 iterations of empty bodies: each iteration counts as a step.
  expectError("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
              "too many steps", {.maxSteps = 200'000});
}

TEST(JinjaLimits, JsonInputPastTheDepthBoundIsAnError) {
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  for (size_t i = 0; i < kMaxJsonDepth + 1; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_THROW(Value::fromJson(deep), TemplateError);
  nlohmann::ordered_json fine = nlohmann::ordered_json::array();
  for (size_t i = 0; i + 1 < kMaxJsonDepth; ++i) fine = nlohmann::ordered_json::array({fine});
  EXPECT_EQ(Value::fromJson(fine).depth(), static_cast<int>(kMaxJsonDepth));
}

}  // namespace
}  // namespace kvscope::jinja
