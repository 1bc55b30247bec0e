#include "server/session_slots.h"

#include <algorithm>

namespace kvscope::server {
namespace {

size_t commonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return static_cast<size_t>(ia - a.begin());
}

}  // namespace

SessionSlots::SessionSlots(size_t capacity, Maker makeFirst)
    : m_capacity(std::max<size_t>(1, capacity)), m_makeFirst(std::move(makeFirst)) {}

Expected<runtime::Session*> SessionSlots::add() {
  std::unique_ptr<runtime::Session> session;
  if (m_slots.empty()) {
    KVS_ASSIGN_OR_RETURN(session, m_makeFirst());
  } else {
    KVS_ASSIGN_OR_RETURN(session, m_slots.front().session->sibling());
  }
  m_slots.push_back({std::move(session), 0});
  return m_slots.back().session.get();
}

Expected<runtime::Session*> SessionSlots::any() {
  if (m_slots.empty()) return add();
  return m_slots.front().session.get();
}

Expected<runtime::Session*> SessionSlots::acquire(std::span<const int32_t> prompt) {
  Slot* best = nullptr;
  size_t bestPrefix = 0;
  for (Slot& s : m_slots) {
    const size_t n = commonPrefix(s.session->history(), prompt);
    if (!best || n > bestPrefix) {
      best = &s;
      bestPrefix = n;
    }
  }
  Slot* chosen = nullptr;
  if (best && bestPrefix > 0 && 2 * bestPrefix >= prompt.size()) chosen = best;
  if (!chosen) {
    for (Slot& s : m_slots)
      if (s.session->history().empty()) chosen = &s;
  }
  // A slot that cannot be made (no memory for another cache, or on a GPU for
  // another copy of the weights) is no failure while one exists.
  if (!chosen && m_slots.size() < m_capacity) {
    auto added = add();
    if (!added.ok() && m_slots.empty()) return added.takeError();
    if (added.ok()) chosen = &m_slots.back();
  }
  if (!chosen) {
    chosen = &*std::min_element(m_slots.begin(), m_slots.end(), [](const Slot& a, const Slot& b) {
      return a.lastUsed < b.lastUsed;
    });
  }
  chosen->lastUsed = ++m_clock;
  return chosen->session.get();
}

}  // namespace kvscope::server
