// A connected send/recv pair over any Transport (listen on one, poll connect
// and accept from one thread), and request polling with a deadline.
#pragma once

#include <cstdint>

#include "plugin/common/status.h"
#include "plugin/transport/transport.h"

namespace resilient::test {

struct TransportPair {
  transport::Transport* sender = nullptr;
  transport::Transport* receiver = nullptr;
  void* senderCtx = nullptr;
  void* receiverCtx = nullptr;
  uint8_t handle[transport::kHandleSize] = {};
  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;

  TransportPair() = default;
  TransportPair(const TransportPair&) = delete;
  TransportPair& operator=(const TransportPair&) = delete;
  ~TransportPair();  // closes what it holds
};

// Listens on `receiver` device 0 and polls connect/accept until both comms exist.
Status connectPair(transport::Transport* sender, void* senderCtx, transport::Transport* receiver,
                   void* receiverCtx, TransportPair* pair, int timeoutMs = 5000);

// Polls test() until done, an error, or timeoutMs (timeoutError).
Status waitRequest(transport::Transport* t, void* request, int* sizes = nullptr,
                   int timeoutMs = 10000);

uint64_t monotonicMs();

}  // namespace resilient::test
