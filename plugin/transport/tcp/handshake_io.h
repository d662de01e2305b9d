// Moving the handshake's fixed-size messages on a non-blocking socket, a step
// at a time: each call takes what the socket has (or sends what it accepts)
// now, never waits, and says how far the message got. Both ends of the
// handshake are polled this way (NCCL's connect and accept polling).
#pragma once

#include <cstddef>
#include <cstdint>

namespace resilient::transport::tcp {

enum class IoStep {
  kPending,   // not complete yet: call again later
  kComplete,  // all `size` bytes moved
  kClosed,    // the peer closed the connection (receiving only)
  kFailed,    // a socket error: *err
};

// Receives toward `size` bytes into `buf`, of which *done have arrived.
IoStep receiveStep(int fd, uint8_t* buf, size_t size, size_t* done, int* err) noexcept;
// Sends toward `size` bytes from `buf`, of which *done have been sent.
IoStep sendStep(int fd, const uint8_t* buf, size_t size, size_t* done, int* err) noexcept;

}  // namespace resilient::transport::tcp
