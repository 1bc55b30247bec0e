#include "server/stop_trimmer.h"

#include <algorithm>
#include <utility>

namespace kvscope::server {

StopTrimmer::StopTrimmer(std::vector<std::string> stops) : m_stops(std::move(stops)) {
  std::erase_if(m_stops, [](const std::string& s) { return s.empty(); });
}

std::string StopTrimmer::push(std::string_view piece) {
  if (m_stopped) return {};
  m_held += piece;
  // The earliest complete stop sequence ends the text.
  size_t cut = std::string::npos;
  for (const std::string& stop : m_stops) cut = std::min(cut, m_held.find(stop));
  if (cut != std::string::npos) {
    m_stopped = true;
    std::string out = m_held.substr(0, cut);
    m_held.clear();
    return out;
  }
  // Hold back the longest tail that a stop sequence starts with.
  size_t keep = 0;
  for (const std::string& stop : m_stops) {
    for (size_t n = std::min(stop.size() - 1, m_held.size()); n > keep; --n) {
      if (std::string_view(m_held).substr(m_held.size() - n) ==
          std::string_view(stop).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  std::string out = m_held.substr(0, m_held.size() - keep);
  m_held.erase(0, m_held.size() - keep);
  return out;
}

std::string StopTrimmer::finish() {
  if (m_stopped) return {};
  return std::exchange(m_held, {});
}

}  // namespace kvscope::server
