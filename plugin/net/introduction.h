// The in-band introduction of a connection whose inner transport fills the
// listen handle (no room for the trailer, plugin/net/handle_trailer.h): the
// connecting side sends its own trailer -- its liveness channel, pid and a key
// for this connection -- as the first message of the connection, before any
// of NCCL's, and the accepting side receives it into a buffer of its own
// before any of NCCL's receives. On arrival the acceptor opens (or reuses) a
// liveness link to the connector's process and binds the key: both ends then
// know their peer process, as with the trailer.
//
// Both sides decide alike, from the handle alone: no trailer in it means an
// introduction (listen writes one whenever there is room, even one that says
// "no liveness channel here"). A transport that takes no host memory cannot
// carry it: both sides then run the connection without a liveness channel,
// and say so once.
//
// Threads: made and started by the control path (connect, accept); advanced
// by the data path of its connection only (its test() calls, before NCCL's
// own; and its first isend or irecv, if the inner transport had no request
// free at setup). Once per connection: the one allocation is at setup.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "plugin/net/handle_trailer.h"
#include "plugin/transport/transport.h"

namespace resilient::net {

// The tag of the introduction's message: NCCL tags its messages with the
// sender's rank, so by the order of posting (first on both sides) it is
// matched first by in-order transports and by tag-matching ones alike.
inline constexpr int kIntroductionTag = 0;

class Introduction {
 public:
  enum class Side { kConnector, kAcceptor };

  // Registers the buffer on the inner comm and posts the send (connector, of
  // `ours`) or the receive (acceptor). An error: the connection cannot be
  // introduced, and must not be used (its peer expects the introduction).
  // The comm outlives the introduction's use of it (release() comes first).
  static Status start(transport::SendComm& comm, const HandleTrailer& ours,
                      std::unique_ptr<Introduction>* out);
  static Status start(transport::RecvComm& comm, std::unique_ptr<Introduction>* out);
  ~Introduction();
  Introduction(const Introduction&) = delete;
  Introduction& operator=(const Introduction&) = delete;

  // Whether the message went (connector) or came (acceptor).
  bool done() const noexcept { return done_; }
  // Whether it is posted (NCCL's requests may follow it).
  bool posted() const noexcept { return posted_; }
  // Posts the message if it is not posted yet (true once it is: NCCL's own
  // requests may follow), else tests it. An error fails the connection.
  Status post(bool* posted) noexcept;
  // Tests it; *arrived is true once, on the acceptor's side, when the
  // connector's trailer came (then in *theirs). An error fails the connection.
  Status progress(bool* arrived, HandleTrailer* theirs) noexcept;
  // Deregisters the buffer (before the inner comm closes).
  void release() noexcept;

 private:
  Introduction(transport::SendComm* send, transport::RecvComm* recv);
  static Status begin(std::unique_ptr<Introduction> intro, std::unique_ptr<Introduction>* out);

  transport::SendComm* const send_;  // the connector's, or
  transport::RecvComm* const recv_;  // the acceptor's
  transport::Comm& comm_;
  const Side side_;
  alignas(64) std::byte buffer_[kTrailerSize] = {};
  std::unique_ptr<transport::MemoryRegion> region_;
  transport::Request* request_ = nullptr;
  bool posted_ = false;
  bool done_ = false;
};

// Whether the inner transport can carry an introduction on device `dev` (it
// takes host memory).
bool canIntroduce(transport::Transport& inner, int dev);

}  // namespace resilient::net
