// SentencePiece-style merging, as llama.cpp's llm_tokenizer_spm: start from
// UTF-8 characters and repeatedly merge the adjacent pair whose concatenation is
// the highest-scoring token (ties: leftmost). Pieces that never became a token
// are spelled with byte tokens.

#include <algorithm>
#include <queue>

#include "tokenizer/utf8.h"
#include "tokenizer/vocab_index.h"

namespace kvscope::tokenizer {
namespace {

struct Symbol {
  int prev = -1;
  int next = -1;
  size_t offset = 0;  // into the text
  size_t length = 0;  // bytes; 0 once merged into its left neighbour
};

struct Bigram {
  int left = 0;
  int right = 0;
  float score = 0.0f;
  size_t length = 0;  // of the concatenation when queued; a mismatch marks it stale
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SpmSession {
 public:
  SpmSession(const VocabIndex& index, std::string_view text) : m_index(index), m_text(text) {}

  void run(std::vector<TokenId>& out) {
    splitCharacters();
    for (int i = 1; i < static_cast<int>(m_symbols.size()); ++i) tryAddBigram(i - 1, i);
    while (!m_queue.empty()) {
      const Bigram bigram = m_queue.top();
      m_queue.pop();
      Symbol& left = m_symbols[bigram.left];
      Symbol& right = m_symbols[bigram.right];
      if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) {
        continue;
      }
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) m_symbols[right.next].prev = bigram.left;
      tryAddBigram(left.prev, bigram.left);
      tryAddBigram(bigram.left, left.next);
    }
    if (m_symbols.empty()) return;
    for (int i = 0; i != -1; i = m_symbols[i].next) emit(m_symbols[i], out);
  }

 private:
  void splitCharacters() {
    size_t offset = 0;
    while (offset < m_text.size()) {
      Symbol sym;
      sym.offset = offset;
      sym.length = std::min(utf8::sequenceLength(static_cast<uint8_t>(m_text[offset])),
                            m_text.size() - offset);
      offset += sym.length;
      const int index = static_cast<int>(m_symbols.size());
      sym.prev = index - 1;
      sym.next = offset == m_text.size() ? -1 : index + 1;
      m_symbols.push_back(sym);
    }
  }

  void tryAddBigram(int left, int right) {
    if (left == -1 || right == -1) return;
    const size_t length = m_symbols[left].length + m_symbols[right].length;
    const TokenId id = m_index.find(m_text.substr(m_symbols[left].offset, length));
    if (id == kNoToken) return;
    m_queue.push({left, right, m_index.vocab->tokens[id].score, length});
  }

  void emit(const Symbol& sym, std::vector<TokenId>& out) const {
    const std::string_view text = m_text.substr(sym.offset, sym.length);
    if (const TokenId id = m_index.find(text); id != kNoToken) {
      out.push_back(id);
      return;
    }
    for (const char c : text) {
      TokenId id = m_index.byteTokens[static_cast<uint8_t>(c)];
      if (id == kNoToken) id = m_index.vocab->unk;
      if (id != kNoToken) out.push_back(id);
    }
  }

  const VocabIndex& m_index;
  std::string_view m_text;
  std::vector<Symbol> m_symbols;
  std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> m_queue;
};

}  // namespace

void spmEncode(const VocabIndex& index, std::string_view text, std::vector<TokenId>& out) {
  SpmSession(index, text).run(out);
}

}  // namespace kvscope::tokenizer
