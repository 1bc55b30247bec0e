#pragma once
// TextPipeline: what a Hugging Face tokenizer.json does to text before BPE
// merges it — its `normalizer` and `pre_tokenizer` — as plain data, one step
// per component, in the order the file lists them (Sequences flattened).
//
// hf_pipeline.h reads and writes the JSON form; normalize.h and pretokenize.h
// run the steps. Components that only cut text (Digits, Punctuation,
// Whitespace, WhitespaceSplit) are stored as the Split they amount to.

#include <string>
#include <vector>

namespace kvscope::tokenizer {

// How a Split treats the delimiters (the matches, or with `invert` the text
// between them), as in Hugging Face's SplitDelimiterBehavior.
enum class SplitBehavior {
  kRemoved,             // delimiters dropped
  kIsolated,            // delimiters become pieces of their own
  kMergedWithPrevious,  // a delimiter joins the piece before it
  kMergedWithNext,      // a delimiter joins the piece after it
  kContiguous,          // adjacent delimiters form one piece
};

struct NormalizeStep {
  enum class Kind {
    kReplace,  // every match of `pattern` becomes `content`
    kPrepend,  // `content` before the text (each fragment between special tokens)
    kNfc,
    kNfd,
    kNfkc,
    kNfkd,
  };
  Kind kind = Kind::kReplace;
  std::string pattern;  // kReplace: PCRE2 regex, or literal text when `literal`
  bool literal = true;
  std::string content;

  bool operator==(const NormalizeStep&) const = default;
};

struct PreTokenizeStep {
  enum class Kind {
    kSplit,      // cut every piece at the matches of `pattern`
    kByteLevel,  // " " before a piece lacking one (addPrefixSpace), then the
                 // GPT-2 regex (useRegex); bytes are mapped after the last step
    kMetaspace,  // " " -> "▁", a "▁" prepended per `prepend`, then (split)
                 // each "▁" starts a piece
  };
  enum class Prepend { kAlways, kFirst, kNever };  // kFirst: only at the text's start

  Kind kind = Kind::kSplit;
  // kSplit
  std::string pattern;  // PCRE2 regex, or literal text when `literal`
  bool literal = false;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel
  bool addPrefixSpace = false;
  bool useRegex = true;
  // kMetaspace (the replacement is always "▁")
  Prepend prepend = Prepend::kAlways;
  bool split = true;

  bool operator==(const PreTokenizeStep&) const = default;
};

struct TextPipeline {
  std::vector<NormalizeStep> normalizer;
  std::vector<PreTokenizeStep> preTokenizer;

  bool operator==(const TextPipeline&) const = default;
};

}  // namespace kvscope::tokenizer
