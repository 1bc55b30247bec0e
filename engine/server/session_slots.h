#pragma once
// SessionSlots: the sessions served requests run in. A request never touches
// a conversation the app holds: it runs in one of at most `capacity` slots,
// each a Session of its own (its KV cache and history) made when first needed:
// the first by SessionRunner::makeSession, the others as its siblings.
//
// A request goes to the slot whose history shares the longest prefix with its
// prompt when that prefix is at least half of the prompt (a client continuing
// its conversation, or asking again, reuses its cache); otherwise to an empty
// slot, or a new one while there is room (and it can be made), else to the
// least recently used one (its cache then trimmed to what the prompt shares).
//
// Used on the runner's thread only.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "runtime/session.h"

namespace kvscope::server {

class SessionSlots {
 public:
  using Maker = std::function<Expected<std::unique_ptr<runtime::Session>>()>;

  SessionSlots(size_t capacity, Maker makeFirst);

  // A session to render and tokenize with before a slot is chosen (the
  // first slot, made if there is none yet).
  Expected<runtime::Session*> any();
  // The slot `prompt` runs in, marked most recently used.
  Expected<runtime::Session*> acquire(std::span<const int32_t> prompt);

  size_t size() const { return m_slots.size(); }
  // Frees every slot (their caches and backends).
  void clear() { m_slots.clear(); }
  size_t capacity() const { return m_capacity; }
  // Slot i's session (i < size()), for tests and telemetry.
  const runtime::Session& slot(size_t i) const { return *m_slots[i].session; }

 private:
  struct Slot {
    std::unique_ptr<runtime::Session> session;
    uint64_t lastUsed = 0;
  };
  Expected<runtime::Session*> add();

  size_t m_capacity;
  Maker m_makeFirst;
  std::vector<Slot> m_slots;
  uint64_t m_clock = 0;
};

}  // namespace kvscope::server
