#include "tokenizer/normalize.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include <optional>

#include "core/log.h"
#include "tokenizer/regex.h"

namespace kvscope::tokenizer {
namespace {

using Kind = NormalizeStep::Kind;

struct Compiled {
  Kind kind = Kind::kReplace;
  std::optional<Regex> regex;              // kReplace
  std::string content;                     // kReplace, kPrepend
  const icu::Normalizer2* form = nullptr;  // kNf*; owned by ICU
};

Expected<const icu::Normalizer2*> icuForm(Kind kind) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* form = nullptr;
  switch (kind) {
    case Kind::kNfc:
      form = icu::Normalizer2::getNFCInstance(status);
      break;
    case Kind::kNfd:
      form = icu::Normalizer2::getNFDInstance(status);
      break;
    case Kind::kNfkc:
      form = icu::Normalizer2::getNFKCInstance(status);
      break;
    case Kind::kNfkd:
      form = icu::Normalizer2::getNFKDInstance(status);
      break;
    case Kind::kReplace:
    case Kind::kPrepend:
      break;
  }
  if (U_FAILURE(status) || !form) {
    return makeError(ErrorCode::kUnsupported, "ICU cannot provide a Unicode normalization form: {}",
                     u_errorName(status));
  }
  return form;
}

std::string replaceAll(const Regex& regex, std::string_view text, std::string_view content) {
  std::string out;
  size_t at = 0;
  for (const auto& [begin, length] : regex.findAll(text)) {
    out.append(text.substr(at, begin - at)).append(content);
    at = begin + length;
  }
  out.append(text.substr(at));
  return out;
}

std::string normalizeForm(const icu::Normalizer2& form, std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (form.isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  form.normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    // Valid UTF-8 cannot fail; keep the text rather than drop it.
    log::warn("Unicode normalization failed: {}", u_errorName(status));
    return std::string(text);
  }
  return out;
}

}  // namespace

struct Normalizer::Steps {
  std::vector<Compiled> steps;
};

Normalizer::Normalizer() = default;
Normalizer::Normalizer(Normalizer&&) noexcept = default;
Normalizer& Normalizer::operator=(Normalizer&&) noexcept = default;
Normalizer::~Normalizer() = default;

Expected<Normalizer> Normalizer::create(const std::vector<NormalizeStep>& steps) {
  Normalizer normalizer;
  normalizer.m_steps = std::make_unique<Steps>();
  for (const NormalizeStep& step : steps) {
    Compiled compiled{.kind = step.kind, .content = step.content};
    if (step.kind == Kind::kReplace) {
      KVS_ASSIGN_OR_RETURN(compiled.regex, Regex::compile(step.pattern, step.literal));
    } else if (step.kind != Kind::kPrepend) {
      KVS_ASSIGN_OR_RETURN(compiled.form, icuForm(step.kind));
    }
    normalizer.m_steps->steps.push_back(std::move(compiled));
  }
  return normalizer;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string out(text);
  for (const Compiled& step : m_steps->steps) {
    switch (step.kind) {
      case Kind::kReplace:
        out = replaceAll(*step.regex, out, step.content);
        break;
      case Kind::kPrepend:
        // Hugging Face prepends to non-empty text only.
        if (!out.empty()) out.insert(0, step.content);
        break;
      case Kind::kNfc:
      case Kind::kNfd:
      case Kind::kNfkc:
      case Kind::kNfkd:
        out = normalizeForm(*step.form, out);
        break;
    }
  }
  return out;
}

}  // namespace kvscope::tokenizer
