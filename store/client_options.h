// What a store client needs beyond the address: job token, identity and
// timeouts. fromParams() takes them from the NCCL_RESILIENT_* knobs
// (docs/configuration.md).
#pragma once

#include <functional>
#include <string>

#include "store/store.h"

namespace resilient::store {

struct ClientOptions {
  std::string token;              // job token (NCCL_RESILIENT_JOB_TOKEN)
  std::string name;               // identity in the server's log lines; default host:pid
  Millis defaultTimeout{300000};  // calls without a Timeout (STORE_TIMEOUT_MS)
  Millis connectTimeout{60000};   // first connection, with retries (STORE_CONNECT_TIMEOUT_MS)
  Millis reconnectTimeout{5000};  // after a connection broke (STORE_RECONNECT_TIMEOUT_MS)
  Millis memberTimeout{2000};     // etcd: one attempt at one member (STORE_MEMBER_TIMEOUT_MS)
  Millis backoffInitial{20};      // first retry delay; doubles with jitter
  Millis backoffMax{1000};        // retry delay cap
  // TCP: a server restarted on the same address (a new instance, its state
  // empty) is taken rather than reported lost: the client goes on with it and
  // calls onServerRestart (from the thread that reconnected, with the
  // client's connection lock held: it may only take note), so that its owner
  // puts back what it needs (the restart library, restart/loop/store_restarts.h).
  // A refused connection is then retried until reconnectTimeout, and a call
  // of any kind in flight when the server went is sent to the new instance
  // (what it did on the old one went with that one's state).
  bool followRestarts = false;
  std::function<void()> onServerRestart;

  static ClientOptions fromParams();
};

// "host:pid" of this process.
std::string defaultClientName();

}  // namespace resilient::store
