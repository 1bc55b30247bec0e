// Rank-based BPE on one pre-tokenized piece, as llama.cpp's
// llm_tokenizer_bpe_session (and Hugging Face's BPE model): start from UTF-8
// characters and repeatedly apply the lowest-ranked merge among adjacent pairs
// (ties: leftmost). Pieces left without a token fall back to byte tokens.

#include <algorithm>
#include <queue>
#include <string>

#include "tokenizer/utf8.h"
#include "tokenizer/vocab_index.h"

namespace kvscope::tokenizer {
namespace {

struct Symbol {
  size_t offset = 0;
  size_t length = 0;  // 0 once merged into its left neighbour
  int prev = -1;
  int next = -1;
};

struct Bigram {
  int left = 0;
  int right = 0;
  int rank = 0;
  std::string text;  // the concatenation when queued; a mismatch marks it stale
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeSession {
 public:
  BpeSession(const VocabIndex& index, std::string_view word) : m_index(index), m_word(word) {}

  void run(std::vector<TokenId>& out) {
    splitCharacters();
    for (int i = 1; i < static_cast<int>(m_symbols.size()); ++i) addBigram(i - 1, i);
    while (!m_queue.empty()) {
      const Bigram bigram = m_queue.top();
      m_queue.pop();
      Symbol& left = m_symbols[bigram.left];
      Symbol& right = m_symbols[bigram.right];
      if (left.length == 0 || right.length == 0) continue;
      if (m_word.substr(left.offset, left.length + right.length) != bigram.text) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) m_symbols[right.next].prev = bigram.left;
      addBigram(left.prev, bigram.left);
      addBigram(bigram.left, left.next);
    }
    bool lastWasUnknown = false;
    for (const Symbol& sym : m_symbols) {
      if (sym.length > 0) emit(m_word.substr(sym.offset, sym.length), out, lastWasUnknown);
    }
  }

 private:
  void splitCharacters() {
    size_t offset = 0;
    while (offset < m_word.size()) {
      Symbol sym;
      sym.offset = offset;
      sym.length = std::min(utf8::sequenceLength(static_cast<uint8_t>(m_word[offset])),
                            m_word.size() - offset);
      offset += sym.length;
      const int index = static_cast<int>(m_symbols.size());
      sym.prev = index - 1;
      sym.next = offset == m_word.size() ? -1 : index + 1;
      m_symbols.push_back(sym);
    }
  }

  void addBigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string_view l = m_word.substr(m_symbols[left].offset, m_symbols[left].length);
    const std::string_view r = m_word.substr(m_symbols[right].offset, m_symbols[right].length);
    std::string key;
    key.reserve(l.size() + 1 + r.size());
    key.append(l).append(" ").append(r);
    const auto it = m_index.mergeRank.find(key);
    if (it == m_index.mergeRank.end()) return;
    m_queue.push({left, right, it->second, std::string(l).append(r)});
  }

  void emit(std::string_view text, std::vector<TokenId>& out, bool& lastWasUnknown) const {
    if (const TokenId id = m_index.find(text); id != kNoToken) {
      out.push_back(id);
      lastWasUnknown = false;
      return;
    }
    const Vocab& vocab = *m_index.vocab;
    if (vocab.byteLevel) {
      // Every byte-level character is a token in a sound vocabulary; llama.cpp
      // looks the raw bytes up one by one and skips what it cannot find.
      for (const char c : text) {
        if (const TokenId id = m_index.find(std::string_view(&c, 1)); id != kNoToken) {
          out.push_back(id);
        }
      }
      return;
    }
    // SentencePiece-style byte fallback: all bytes as <0xXX>, else one unknown.
    const bool spellable = std::all_of(text.begin(), text.end(), [&](char c) {
      return m_index.byteTokens[static_cast<uint8_t>(c)] != kNoToken;
    });
    if (spellable) {
      for (const char c : text) out.push_back(m_index.byteTokens[static_cast<uint8_t>(c)]);
      lastWasUnknown = false;
    } else if (vocab.unk != kNoToken && !(vocab.fuseUnknown && lastWasUnknown)) {
      out.push_back(vocab.unk);
      lastWasUnknown = true;
    }
  }

  const VocabIndex& m_index;
  std::string_view m_word;
  std::vector<Symbol> m_symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> m_queue;
};

}  // namespace

void bpeEncodeWord(const VocabIndex& index, std::string_view word, std::vector<TokenId>& out) {
  if (index.vocab->ignoreMerges) {
    if (const TokenId id = index.find(word); id != kNoToken) {
      out.push_back(id);
      return;
    }
  }
  BpeSession(index, word).run(out);
}

}  // namespace kvscope::tokenizer
