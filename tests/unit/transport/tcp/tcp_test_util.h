// Helpers of the TCP transport tests: loopback options, a connected pair
// built by polling connect/accept from one thread, request polling with a
// deadline, and raw sockets that talk to a listen port directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plugin/common/status.h"
#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/tcp_transport.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::test {

// Loopback ("lo"), the given family, short timeouts suited to tests.
transport::tcp::TcpOptions loopbackOptions(int family = 0);

// A listen comm, its handle and, once connected, both comms. Closes what it holds.
struct TcpPair {
  transport::tcp::TcpTransport* sender = nullptr;
  transport::tcp::TcpTransport* receiver = nullptr;
  uint8_t handle[transport::kHandleSize] = {};
  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;

  TcpPair() = default;
  TcpPair(const TcpPair&) = delete;
  TcpPair& operator=(const TcpPair&) = delete;
  ~TcpPair();
};

// receiver.listen() on device 0.
Status listenOn(transport::tcp::TcpTransport* receiver, TcpPair* pair);
// Polls sender.connect() and receiver.accept() in turn until both comms exist
// (or either fails, or timeoutMs passes: timeoutError).
Status connectPair(transport::tcp::TcpTransport* sender, transport::tcp::TcpTransport* receiver,
                   TcpPair* pair, int timeoutMs = 5000);

// Polls test() until done or error (or timeoutMs: timeoutError).
Status waitRequest(transport::Transport* t, void* request, int* sizes = nullptr,
                   int timeoutMs = 10000);

// Fills `buf` with a pattern derived from `seed`.
void fillPattern(std::vector<uint8_t>* buf, uint32_t seed);
// Index of the first byte that differs from the pattern, or -1.
int64_t checkPattern(const uint8_t* data, size_t size, uint32_t seed);

// A blocking TCP connection to the address in a listen handle (-1 on failure).
int rawConnect(const void* handle);
// Reads until EOF/error or timeoutMs; true when the peer closed (EOF or reset).
bool rawWaitClosed(int fd, int timeoutMs);

// "ip:port" of the local end of a socket.
std::string localAddressText(int fd);

uint64_t monotonicMs();

}  // namespace resilient::test
