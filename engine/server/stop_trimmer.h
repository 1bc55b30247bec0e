#pragma once
// StopTrimmer: applies a request's stop sequences to text that arrives in
// pieces (one or a few tokens at a time). Text is released only once no stop
// sequence can begin in it, so nothing from a stop sequence onwards is ever
// sent, even when the sequence spans several pieces. Pieces are whole UTF-8
// characters and stop sequences valid UTF-8, so what is released is too.

#include <string>
#include <string_view>
#include <vector>

namespace kvscope::server {

class StopTrimmer {
 public:
  explicit StopTrimmer(std::vector<std::string> stops);

  // The text that can be sent now. Once a stop sequence is complete, returns
  // the text before it and stopped() turns true; later pieces return "".
  std::string push(std::string_view piece);
  // The text held back when the generation ended without a stop sequence.
  std::string finish();
  bool stopped() const { return m_stopped; }

 private:
  std::vector<std::string> m_stops;
  std::string m_held;  // text that may be the start of a stop sequence
  bool m_stopped = false;
};

}  // namespace kvscope::server
