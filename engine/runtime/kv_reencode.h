#pragma once
// A KV policy switch without a forward pass: the rows a backend holds, moved
// into another backend's empty cache under that cache's schemes.
//
// A stream (layer, K or V) stored alike in both (same scheme, same cache
// seed) is copied byte for byte; a stream stored in f16 now is decoded
// (exactly: f16 is lossless to float) and encoded under its new scheme. Any
// other change would encode an already lossy row again, so it is not offered:
// the session runs the history again instead (Session::setKvPolicy).
//
// The result is not what a fresh prefill under the new policy holds: there
// each layer's rows come from hidden states computed with the compressed
// caches of the layers below, here from the f16 run's (docs/RESULTS.md,
// "Switching the KV policy", measures the two against each other).

#include "backend/backend.h"
#include "kv/kv_layout.h"

namespace kvscope::runtime {

// Whether `to` can take `from`'s rows as above: the same heads and head
// dimension, and every stream either stored alike or stored in f16 in `from`.
bool canReencode(const kv::KvLayout& from, const kv::KvLayout& to);

// Fills `to`'s empty cache with every row `from` caches (canReencode of their
// layouts must hold), and gives `to` the codec error of the re-encoded rows
// (every 16th row of each head, against its f16 values), as a prefill would
// have measured it. `from` is left as it was; on an error `to` stays empty.
Status reencodeKv(const backend::Backend& from, backend::Backend& to);

}  // namespace kvscope::runtime
