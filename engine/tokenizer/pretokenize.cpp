#include "tokenizer/pretokenize.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace kvscope::tokenizer {
namespace {

// llama.cpp's regex lists (src/llama-vocab.cpp, llm_tokenizer_bpe), in the
// forms llama.cpp actually runs: `(?i:...)` spelled out with character
// classes so that only ASCII letters fold, and no possessive quantifiers.
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr std::string_view kContractions =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))";
constexpr std::string_view kLlama3Tail = R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Upper- and lower-case runs as llama.cpp expresses them: a letter that is not
// ASCII lower (resp. upper) case.
constexpr std::string_view kUpperRun = R"(((?=[\p{L}])([^a-z])))";
constexpr std::string_view kLowerRun = R"(((?=[\p{L}])([^A-Z])))";
constexpr std::string_view kCjk = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr std::string_view kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
constexpr std::string_view kDeepseekPunct =
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)";
constexpr std::string_view kPoro =
    R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C})]+)";

std::string concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (const auto part : parts) out += part;
  return out;
}

std::string llama3Like(std::string_view digits) {
  return concat({kContractions, R"(|[^\r\n\p{L}\p{N}]?\p{L}+|)", digits, kLlama3Tail});
}

std::string tekkenLike(std::string_view suffix, std::string_view digits) {
  return concat({R"([^\r\n\p{L}\p{N}]?)", kUpperRun, "*", kLowerRun, "+", suffix,
                 R"(|[^\r\n\p{L}\p{N}]?)", kUpperRun, "+", kLowerRun, "*", suffix, "|", digits,
                 R"(| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"});
}

bool isOneOf(std::string_view name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// Non-ASCII White_Space characters; llama.cpp turns them all into a plain
// whitespace byte before matching.
bool isWideWhitespace(uint32_t cp) {
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// The text the regexes run on: every non-ASCII whitespace character becomes
// "\v", as in llama.cpp. `offsets[i]` is where shadow byte i starts in the
// real text (one entry past the end too), so pieces can be cut from the text.
struct Shadow {
  std::string text;
  std::vector<size_t> offsets;  // empty when the shadow is the text itself
};

Shadow whitespaceShadow(std::string_view text) {
  Shadow shadow;
  bool mapped = false;
  size_t at = 0;
  while (at < text.size()) {
    const auto lead = static_cast<uint8_t>(text[at]);
    const size_t n = std::min(utf8::sequenceLength(lead), text.size() - at);
    uint32_t cp = 0;
    if (n == 2) cp = ((lead & 0x1Fu) << 6) | (static_cast<uint8_t>(text[at + 1]) & 0x3Fu);
    if (n == 3) {
      cp = ((lead & 0x0Fu) << 12) | ((static_cast<uint8_t>(text[at + 1]) & 0x3Fu) << 6) |
           (static_cast<uint8_t>(text[at + 2]) & 0x3Fu);
    }
    if (isWideWhitespace(cp) && !mapped) {
      mapped = true;
      shadow.text.assign(text.substr(0, at));
      for (size_t i = 0; i < at; ++i) shadow.offsets.push_back(i);
    }
    if (mapped) {
      const std::string_view unit = isWideWhitespace(cp) ? "\v" : text.substr(at, n);
      for (size_t i = 0; i < unit.size(); ++i) shadow.offsets.push_back(at + std::min(i, n - 1));
      shadow.text.append(unit);
    }
    at += n;
  }
  if (!mapped) {
    shadow.text.assign(text);
  } else {
    shadow.offsets.push_back(text.size());
  }
  return shadow;
}

}  // namespace

Expected<std::vector<std::string>> preTokenizerRegexes(std::string_view name) {
  using V = std::vector<std::string>;
  const std::string gpt2(kGpt2);
  if (name == "none") return V{};
  if (name == "default" || name.empty()) {
    return V{R"([\p{P}\$\+<=>\^~\|]+)", gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  }
  if (isOneOf(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "dbrx",
                     "smaug-bpe", "chatglm-bpe", "glm4"})) {
    return V{llama3Like(R"(\p{N}{1,3})")};
  }
  if (isOneOf(name, {"qwen2", "stablelm2", "deepseek-r1-qwen", "megrez", "hunyuan"})) {
    return V{llama3Like(R"(\p{N})")};
  }
  if (name == "deepseek-llm") {
    return V{R"([\r\n])",
             std::string(kDeepseekLetters),
             std::string(kDeepseekPunct),
             R"(\s+$)",
             std::string(kCjk),
             R"(\p{N}+)"};
  }
  if (name == "deepseek-coder") {
    return V{R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", std::string(kCjk), R"(\p{N})"};
  }
  if (name == "falcon") return V{R"([\p{P}\$\+<=>\^~\|`]+)", gpt2, "[0-9][0-9][0-9]"};
  if (isOneOf(name, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                     "minerva-7b"})) {
    return V{R"(\p{N})", gpt2};
  }
  if (isOneOf(name, {"gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "jina-es", "jina-de",
                     "jina-v2-es", "jina-v2-de", "roberta-bpe", "trillion"})) {
    return V{gpt2};
  }
  if (isOneOf(name, {"poro-chat", "bloom", "gpt3-finnish"})) return V{std::string(kPoro)};
  if (name == "viking") return V{std::string(kPoro), R"(\p{N})"};
  if (name == "tekken") return V{tekkenLike("", R"(\p{N})")};
  if (isOneOf(name, {"gpt-4o", "llama4"})) {
    return V{tekkenLike(concat({kContractions, "?"}), R"(\p{N}{1,3})")};
  }
  return makeError(ErrorCode::kUnsupported,
                   "this model's pre-tokenizer '{}' is not supported; its text would be split "
                   "differently from the way the model was trained",
                   name);
}

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // "▁"

// One primitive operation of a compiled pre-tokenizer.
struct Op {
  enum class Kind { kSplit, kPrefixSpace, kMetaspace };
  Kind kind = Kind::kSplit;
  std::optional<Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  PreTokenizeStep::Prepend prepend = PreTokenizeStep::Prepend::kAlways;
};

struct Segment {
  size_t offset = 0;
  size_t length = 0;
  bool delimiter = false;
};

// Groups the segments of one piece per `behavior`, as Hugging Face's
// NormalizedString::split does.
std::vector<Segment> group(const std::vector<Segment>& segments, SplitBehavior behavior) {
  std::vector<Segment> out;
  bool previousDelimiter = false;
  const auto mergeInto = [&](const Segment& s, bool forward) {
    // A delimiter joins its neighbour unless that neighbour is a delimiter.
    if (s.delimiter && !previousDelimiter && !out.empty()) {
      Segment& last = out.back();
      if (forward) {
        last.length += s.length;
      } else {
        last.offset = s.offset;
        last.length += s.length;
      }
    } else {
      out.push_back({s.offset, s.length, false});
    }
    previousDelimiter = s.delimiter;
  };
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Segment& s : segments)
        if (!s.delimiter) out.push_back(s);
      break;
    case SplitBehavior::kIsolated:
      out = segments;
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& s : segments) {
        if (s.delimiter && previousDelimiter) {
          out.back().length += s.length;
        } else {
          out.push_back(s);
        }
        previousDelimiter = s.delimiter;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& s : segments) mergeInto(s, true);
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) mergeInto(*it, false);
      std::reverse(out.begin(), out.end());
      break;
  }
  return out;
}

// Cuts one piece: the matches (found on the whitespace shadow when asked) and
// the gaps between them, grouped per the op's behaviour.
void splitPiece(const Op& op, bool llamaCppWhitespace, const std::string& piece,
                std::vector<std::string>& out) {
  Shadow shadow;
  if (llamaCppWhitespace) shadow = whitespaceShadow(piece);
  const std::string_view subject = llamaCppWhitespace ? shadow.text : piece;
  const auto real = [&](size_t at) { return shadow.offsets.empty() ? at : shadow.offsets[at]; };
  std::vector<Segment> segments;
  size_t gap = 0;
  for (const auto& [begin, length] : op.regex->findAll(subject)) {
    if (begin > gap) segments.push_back({real(gap), real(begin) - real(gap), op.invert});
    segments.push_back({real(begin), real(begin + length) - real(begin), !op.invert});
    gap = begin + length;
  }
  if (gap < subject.size()) {
    segments.push_back({real(gap), piece.size() - real(gap), op.invert});
  }
  for (const Segment& s : group(segments, op.behavior)) {
    if (s.length > 0) out.push_back(piece.substr(s.offset, s.length));
  }
}

std::string replaceSpaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == ' ') {
      out += kSpaceMark;
    } else {
      out += c;
    }
  }
  return out;
}

Expected<Op> splitOp(std::string_view pattern, bool literal, SplitBehavior behavior, bool invert) {
  KVS_ASSIGN_OR_RETURN(Regex regex, Regex::compile(pattern, literal));
  Op op;
  op.regex = std::move(regex);
  op.behavior = behavior;
  op.invert = invert;
  return op;
}

}  // namespace

struct PreTokenizer::Ops {
  std::vector<Op> ops;
};

PreTokenizer::PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

Expected<PreTokenizer> PreTokenizer::create(const std::vector<PreTokenizeStep>& steps) {
  using Kind = PreTokenizeStep::Kind;
  PreTokenizer pre;
  pre.m_ops = std::make_unique<Ops>();
  auto& ops = pre.m_ops->ops;
  for (const PreTokenizeStep& step : steps) {
    switch (step.kind) {
      case Kind::kSplit: {
        KVS_ASSIGN_OR_RETURN(Op op,
                             splitOp(step.pattern, step.literal, step.behavior, step.invert));
        ops.push_back(std::move(op));
        break;
      }
      case Kind::kByteLevel:
        if (step.addPrefixSpace) ops.push_back({.kind = Op::Kind::kPrefixSpace});
        if (step.useRegex) {
          const std::string gpt2 = concat({kGpt2, R"(|\s+)"});
          KVS_ASSIGN_OR_RETURN(Op op, splitOp(gpt2, false, SplitBehavior::kIsolated, false));
          ops.push_back(std::move(op));
        }
        break;
      case Kind::kMetaspace:
        ops.push_back({.kind = Op::Kind::kMetaspace, .prepend = step.prepend});
        if (step.split) {
          KVS_ASSIGN_OR_RETURN(Op op,
                               splitOp(kSpaceMark, true, SplitBehavior::kMergedWithNext, false));
          ops.push_back(std::move(op));
        }
        break;
    }
  }
  return pre;
}

Expected<PreTokenizer> PreTokenizer::named(std::string_view name) {
  KVS_ASSIGN_OR_RETURN(const auto regexes, preTokenizerRegexes(name));
  std::vector<PreTokenizeStep> steps;
  for (const std::string& regex : regexes) steps.push_back({.pattern = regex});
  KVS_ASSIGN_OR_RETURN(PreTokenizer pre, create(steps));
  pre.m_llamaCppWhitespace = true;
  return pre;
}

std::vector<std::string> PreTokenizer::split(std::string_view text, bool atTextStart) const {
  if (text.empty()) return {};
  std::vector<std::string> pieces{std::string(text)};
  for (const Op& op : m_ops->ops) {
    std::vector<std::string> next;
    next.reserve(pieces.size() * 2);
    for (size_t i = 0; i < pieces.size(); ++i) {
      std::string& piece = pieces[i];
      switch (op.kind) {
        case Op::Kind::kSplit:
          splitPiece(op, m_llamaCppWhitespace, piece, next);
          break;
        case Op::Kind::kPrefixSpace:
          if (!piece.starts_with(' ')) piece.insert(0, " ");
          next.push_back(std::move(piece));
          break;
        case Op::Kind::kMetaspace: {
          std::string replaced = replaceSpaces(piece);
          const bool first = atTextStart && i == 0;
          const bool prepend = op.prepend == PreTokenizeStep::Prepend::kAlways ||
                               (op.prepend == PreTokenizeStep::Prepend::kFirst && first);
          if (prepend && !replaced.starts_with(kSpaceMark)) replaced.insert(0, kSpaceMark);
          next.push_back(std::move(replaced));
          break;
        }
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace kvscope::tokenizer
