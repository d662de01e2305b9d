// Settings of the TCP inner transport. The caller (the net plugin) fills them
// from its knobs; the transport itself reads no environment variable and no
// registry. Out-of-range values are clamped by clampOptions() with one WARN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/net/socket.h"

namespace resilient::transport::tcp {

// Sockets of one connection, control socket included (the handshake's limit).
inline constexpr int kMaxSockets = 64;
inline constexpr int kMaxDataSockets = kMaxSockets - 1;
inline constexpr int kMaxHelperThreads = 16;
// Bounds of the striping chunk (carried in the handshake; the receiver checks it).
inline constexpr uint32_t kMinChunkBytes = 4u << 10;
inline constexpr uint32_t kMaxChunkBytes = 16u << 20;
// Largest payload sent inline on the control socket.
inline constexpr size_t kMaxInlineBytes = 1u << 20;
// Largest fixed socket buffer (the kernel caps it lower: net.core.*mem_max).
inline constexpr int kMaxSocketBufferBytes = 1 << 30;

struct TcpOptions {
  // Interfaces to use, NCCL_SOCKET_IFNAME syntax: "eth,ib" (prefixes), "^docker"
  // (exclude prefixes), "=eth0" (exact names), "^=eth1". Empty: like NCCL, IPoIB
  // ("ib*") first, else anything but "lo" and "docker*", else those.
  std::string ifname;
  // Address family of the devices: 0 (any; IPv4 preferred per interface),
  // AF_INET or AF_INET6.
  int family = 0;
  // Data sockets per connection [1, 63]; payloads above inlineBytes are striped
  // over them. Only the connecting (sending) side's value matters.
  int nSocks = 2;
  // Helper threads per connection [0, min(nSocks, 16)]; each owns nSocks/nThreads
  // data sockets. 0: none, the calling (proxy) thread moves the striped bytes
  // itself inside test(). Local to each side.
  int nThreads = 2;
  // connect() gives up with a timeout error after this long (refused connections
  // are retried with backoff until then; NCCL itself would poll forever).
  int connectTimeoutMs = 30000;
  // TCP_USER_TIMEOUT of every socket: unacknowledged data older than this fails
  // the connection (a dead link or host). 0: kernel default (~15 minutes).
  int tcpUserTimeoutMs = 10000;
  // A listener drops a socket that has not completed its handshake (or whose
  // connection's other sockets have not arrived) within this long.
  int handshakeTimeoutMs = 5000;
  // Both sides must hold the same token (or both none): each proves it holds
  // it in the handshake (handshake_proof.h); it never travels.
  std::string jobToken;
  // Payloads of at most this many bytes travel inline on the control socket,
  // served by the calling thread [0, 1 MiB].
  size_t inlineBytes = 64u << 10;
  // Larger payloads are cut into chunks of this size striped round-robin over
  // the data sockets [4 KiB, 16 MiB]. The connecting side's value is used.
  uint32_t chunkBytes = 512u << 10;
  // SO_SNDBUF and SO_RCVBUF of every socket [0, kMaxSocketBufferBytes]; 0:
  // the kernel's autotuning.
  int socketBufferBytes = 0;
};

// Returns `options` with every field brought into its range; one WARN names
// each field that was changed.
TcpOptions clampOptions(const TcpOptions& options);

// What every socket of our TCP transport is set to: TCP_NODELAY,
// TCP_USER_TIMEOUT, keepalive (first probe after 5 s of silence, then every
// second, 5 probes; the user timeout, when set, bounds the total) and the
// buffer size when one is configured.
SocketOptions socketOptions(const TcpOptions& options) noexcept;

}  // namespace resilient::transport::tcp
