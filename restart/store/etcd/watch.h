// Waiting for a key with an etcd watch: the member pushes the event, the
// client does not poll. The watch starts at a revision the caller has
// already checked, so a put between that check and the watch is replayed,
// never missed. When a member fails the watch resumes on the next member
// from the same revision. A watch stream is also renewed on another member
// after a quiet slice (ten member timeouts, at least 5 s), so a frozen member
// that keeps its connections open cannot hold a waiter past that.
#pragma once

#include <cstdint>
#include <string>

#include "restart/store/etcd/rpc.h"

namespace resilient::store::etcd {

// True once `key` is put at a revision >= fromRevision; false at `deadline`.
bool watchForPut(Rpc& rpc, const std::string& key, int64_t fromRevision, TimePoint deadline);

}  // namespace resilient::store::etcd
