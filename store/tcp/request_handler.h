// The TCP store server without its sockets: decodes one request frame,
// applies it to the StoreEngine and encodes the reply. The event loop
// (server.h) feeds it frames and ships the bytes; the fuzz target
// (fuzz/store) drives it directly.
#pragma once

#include <optional>
#include <string>

#include "store/engine.h"
#include "store/tcp/frame_decoder.h"

namespace resilient::store::tcp {

// Longest timeout a client may ask for (wait, barrier): 7 days.
inline constexpr int64_t kMaxTimeoutMs = 7LL * 24 * 3600 * 1000;

class RequestHandler {
 public:
  RequestHandler(StoreEngine& engine, size_t maxFrameBytes);

  // A reply that comes later: the engine's pending id and when it expires.
  struct Deferred {
    uint64_t pendingId = 0;
    TimePoint deadline;
  };

  // Executes `frame` from connection `conn`. Appends the reply to `out`, or
  // returns a Deferred (its Completion arrives through the engine's Notify
  // with owner == conn and tag == the request id). Throws ProtocolError when
  // the payload is malformed: the caller drops the connection.
  std::optional<Deferred> handle(uint64_t conn, const Frame& frame, TimePoint now,
                                 std::string* out);

  // The reply frame of a deferred answer.
  void encodeCompletion(const Completion& c, std::string* out) const;

 private:
  void send(Response& resp, std::string* out) const;

  StoreEngine& engine_;
  size_t maxFrameBytes_;
};

}  // namespace resilient::store::tcp
