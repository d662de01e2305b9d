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
#include <string_view>

#include "store/etcd/rpc.h"

namespace resilient::store::etcd {

// The body of a watch (POST kv::kWatchPath, a streaming answer) for puts of
// `key` from `fromRevision` on.
nlohmann::json watchCreateRequest(const std::string& key, int64_t fromRevision);

// What one line of a watch stream says.
struct WatchLine {
  enum class Kind {
    kMore,      // nothing for us yet (created, progress, other events): read on
    kPut,       // the key was put: the wait is over
    kCanceled,  // etcd canceled the watch (compacted: the history is gone)
    kError,     // an error or an unparsable line
  };
  Kind kind = Kind::kMore;
  bool compacted = false;
  std::string error;
};
WatchLine parseWatchLine(std::string_view line);

// True once `key` is put at a revision >= fromRevision; false at `deadline`.
bool watchForPut(Rpc& rpc, const std::string& key, int64_t fromRevision, TimePoint deadline);

}  // namespace resilient::store::etcd
