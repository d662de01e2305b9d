// What every server of the TCP store protocol does with a client's Hello (the
// store server, tcp/server.h, and the node agent's proxy, proxy/node_proxy.h):
// the version and the job token checked, and the instance id that tells a
// client a restarted server (its state empty) from the one it knew.
#pragma once

#include <cstdint>
#include <string>

#include "store/tcp/protocol.h"

namespace resilient::store::tcp {

// A fresh, non-zero instance id.
uint64_t randomInstanceId();
// kOk, kVersionUnsupported or kTokenRefused (an empty `token`: not checked).
// The token is compared in constant time.
HelloStatus checkHello(const Hello& hello, const std::string& token);

}  // namespace resilient::store::tcp
