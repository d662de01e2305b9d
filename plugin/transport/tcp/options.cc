#include "plugin/transport/tcp/options.h"

#include <sys/socket.h>

#include <algorithm>

#include "common/log.h"

namespace resilient::transport::tcp {
namespace {

template <class T>
void clampField(const char* name, T* value, T low, T high) {
  const T clamped = std::clamp(*value, low, high);
  if (clamped != *value) {
    RES_WARN(NCCL_NET | NCCL_INIT, "tcp: option %s = %lld out of range [%lld, %lld]; using %lld",
             name, static_cast<long long>(*value), static_cast<long long>(low),
             static_cast<long long>(high), static_cast<long long>(clamped));
    *value = clamped;
  }
}

}  // namespace

TcpOptions clampOptions(const TcpOptions& options) {
  TcpOptions o = options;
  if (o.family != 0 && o.family != AF_INET && o.family != AF_INET6) {
    RES_WARN(NCCL_NET | NCCL_INIT,
             "tcp: option family = %d is not 0, AF_INET (%d) or AF_INET6 (%d); using 0 (any)",
             o.family, AF_INET, AF_INET6);
    o.family = 0;
  }
  clampField("nSocks", &o.nSocks, 1, kMaxDataSockets);
  clampField("nThreads", &o.nThreads, 0, std::min(o.nSocks, kMaxHelperThreads));
  clampField("connectTimeoutMs", &o.connectTimeoutMs, 1, 24 * 3600 * 1000);
  clampField("tcpUserTimeoutMs", &o.tcpUserTimeoutMs, 0, 24 * 3600 * 1000);
  clampField("handshakeTimeoutMs", &o.handshakeTimeoutMs, 1, 24 * 3600 * 1000);
  clampField("inlineBytes", &o.inlineBytes, size_t{0}, kMaxInlineBytes);
  clampField("chunkBytes", &o.chunkBytes, kMinChunkBytes, kMaxChunkBytes);
  clampField("socketBufferBytes", &o.socketBufferBytes, 0, kMaxSocketBufferBytes);
  return o;
}

SocketOptions socketOptions(const TcpOptions& options) noexcept {
  return {.noDelay = true,
          .keepAlive = {.idleS = 5, .intervalS = 1, .count = 5},
          .userTimeoutMs = options.tcpUserTimeoutMs,
          .bufferBytes = options.socketBufferBytes};
}

}  // namespace resilient::transport::tcp
