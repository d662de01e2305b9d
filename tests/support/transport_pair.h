// A connected send/receive pair over any Transport (listen on one, connect
// and accept polled from one thread), request polling with a deadline, and a
// checked round trip of patterned data through the pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "plugin/transport/transport.h"

namespace resilient::test {

// A listener, its handle and, once connected, both comms. Closes what it
// holds: the send comm, the receive comm, then the listener.
struct TransportPair {
  transport::Transport* sender = nullptr;
  transport::Transport* receiver = nullptr;
  // Per-communicator contexts (initContext), owned by the caller; nullptr for
  // transports without them.
  transport::Context* senderCtx = nullptr;
  transport::Context* receiverCtx = nullptr;
  std::byte handle[transport::kHandleSize] = {};
  std::unique_ptr<transport::Listener> listener;
  std::unique_ptr<transport::SendComm> sendComm;
  std::unique_ptr<transport::RecvComm> recvComm;

  TransportPair() = default;
  TransportPair(const TransportPair&) = delete;
  TransportPair& operator=(const TransportPair&) = delete;
  ~TransportPair();
};

// receiver->listen() on device 0 (with pair->receiverCtx) into pair->handle.
Status listenOn(transport::Transport* receiver, TransportPair* pair);
// Polls sender->connect() and receiver->accept() in turn until both comms
// exist (or either fails, or timeoutMs passes: timeoutError). Listens first
// unless the pair already listens.
Status connectPair(transport::Transport* sender, transport::Transport* receiver,
                   TransportPair* pair, int timeoutMs = 5000);

// Polls request->test() until done or error (or timeoutMs: timeoutError).
Status waitRequest(transport::Request* request, int* sizes = nullptr, int timeoutMs = 10000);

// Posts one receive of `size` bytes into `buf` with `tag` on the pair's
// receive comm (a null memory region, as for unregistered host memory).
Status postRecv(TransportPair& pair, std::byte* buf, size_t size, int tag,
                transport::Request** request);

// Sends `size` bytes of fillPattern(seed) through the pair with `tag` and
// checks what arrives: the sizes test() reports, every byte, and nothing
// written beyond the message. Both ends are tested in turn from this thread,
// as NCCL's proxy thread tests every outstanding request: without helper
// threads (the TCP transport's inline mode) the bytes move only inside
// test(), so waiting on a large send alone would wait forever.
Status roundTrip(TransportPair& pair, size_t size, uint32_t seed, int tag = 3,
                 int timeoutMs = 20000);

// The bytes of a test buffer, as the transports take them (std::byte*).
template <class T>
std::byte* asBytes(T* data) {
  return reinterpret_cast<std::byte*>(data);
}

// A request that is not null, to see a call overwrite *request as it must
// (NCCL may pre-store 0x1 there); testing it is an error.
transport::Request* anyRequest();

// Fills `buf` with a pattern derived from `seed`.
void fillPattern(std::vector<uint8_t>* buf, uint32_t seed);
// Index of the first byte that differs from the pattern, or -1.
int64_t checkPattern(const uint8_t* data, size_t size, uint32_t seed);

uint64_t monotonicMs();

}  // namespace resilient::test
