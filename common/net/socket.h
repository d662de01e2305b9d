// The one socket helper of the project: stream sockets that are always
// non-blocking and close-on-exec, listening, connecting and accepting, socket
// options, waiting for one descriptor, deadline-bounded exact sends and
// receives, and the one classification of socket failures into Status kinds.
// Every TCP user (our transport, the liveness channel, the store, the host
// engine) goes through here; what differs between them is policy (which
// options, which deadlines), passed in as values.
//
// Errors are Status / errno values, never exceptions: the net plugin calls
// this on NCCL's threads (the store turns them into its exceptions).
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/file_descriptor.h"
#include "common/net/socket_address.h"
#include "common/status.h"

namespace resilient {

// TCP keepalive probes: the first after `idleS` seconds of silence, then every
// `intervalS`, `count` of them before the connection fails.
struct KeepAlive {
  int idleS = 0;
  int intervalS = 0;
  int count = 0;
};

struct SocketOptions {
  bool noDelay = true;    // TCP_NODELAY
  KeepAlive keepAlive;    // off when idleS == 0
  int userTimeoutMs = 0;  // TCP_USER_TIMEOUT; 0 leaves the kernel's
  int bufferBytes = 0;    // SO_SNDBUF and SO_RCVBUF (the kernel doubles it, up to
                          // net.core.*mem_max); 0 leaves the kernel's autotuning
};

struct ListenOptions {
  int backlog = SOMAXCONN;    // the kernel caps it at net.core.somaxconn
  bool reuseAddress = false;  // SO_REUSEADDR (a restarted server takes its port back)
};

// A non-blocking, close-on-exec TCP socket of `family`.
Result<FileDescriptor> openStreamSocket(int family);
// A listening socket bound to `address` (port 0: an ephemeral one; read it
// back with localAddressOf).
Result<FileDescriptor> listenOn(const SocketAddress& address, const ListenOptions& options = {});
// The same on the first address of `host` (resolveAddress).
Result<FileDescriptor> listenOn(const std::string& host, uint16_t port,
                                const ListenOptions& options = {});
// The next pending connection, non-blocking and close-on-exec; `peer` (may be
// null) receives its address. Invalid when none is pending (errno EAGAIN) or
// on failure (errno set).
FileDescriptor acceptConnection(int listenFd, SocketAddress* peer = nullptr) noexcept;

// Applies every option; the first that fails is reported.
Status applySocketOptions(int fd, const SocketOptions& options);
Status setNonBlocking(int fd);
// TCP_QUICKACK. Off: the socket's next ACK waits to ride on our next write
// (or the delayed-ACK timer). On: data received is ACKed now. The kernel may
// switch modes on its own, so callers set it per exchange.
void setQuickAck(int fd, bool on) noexcept;

// Starts a non-blocking connect: 0 when connected already, EINPROGRESS while
// it goes on (wait for writability, then read pendingSocketError), else the errno.
int startConnect(int fd, const SocketAddress& address) noexcept;
// SO_ERROR: the outcome of a connect that was in progress (0: connected).
int pendingSocketError(int fd) noexcept;
// One connect attempt that waits until `deadlineNs` (monotonicNs): 0 and
// *out set, or the errno (ETIMEDOUT at the deadline).
int connectBefore(const SocketAddress& address, uint64_t deadlineNs, FileDescriptor* out);
// Connect attempts every 10 ms until one succeeds or `deadlineNs` passes,
// while the peer refuses or resets (it may not listen yet); other errors end
// it at once. A timeout error names the last errno.
Result<FileDescriptor> connectWithRetry(const SocketAddress& address, uint64_t deadlineNs);

// Waits until `fd` has one of `events` (POLLIN, POLLOUT), an error or a
// hang-up, for at most `timeoutMs` (-1: no limit). True when ready, false on
// timeout; EINTR restarts the wait with what is left.
Result<bool> waitReady(int fd, short events, int timeoutMs);
// The same until `deadlineNs` (monotonicNs).
Result<bool> waitReadyBefore(int fd, short events, uint64_t deadlineNs);

// Sends or receives exactly `bytes` on a non-blocking socket before
// `deadlineNs`: 0, or the errno (ETIMEDOUT at the deadline; 0 bytes read is
// ECONNRESET: the peer closed). *done (may be null) tells how far it got.
int sendExact(int fd, const void* data, size_t bytes, uint64_t deadlineNs, size_t* done = nullptr);
int recvExact(int fd, void* data, size_t bytes, uint64_t deadlineNs, size_t* done = nullptr);
// The same as a Status: a timeout error at the deadline ("timed out sending
// <what>"), else connectionError.
Status sendAll(int fd, const void* data, size_t bytes, uint64_t deadlineNs,
               const std::string& what);
Status recvAll(int fd, void* data, size_t bytes, uint64_t deadlineNs, const std::string& what);

// The Status of a failed socket call on a connection to `peer`; err == 0 means
// end of stream. Failures the peer or the network causes (end of stream,
// reset, broken pipe, the kernel's timeouts, unreachable, refused) are remote
// errors; anything else is a system error.
Status connectionError(int err, const std::string& what, const std::string& peer = {});

}  // namespace resilient
