// The Engine's private parts that its source files share (engine.cc: its
// lifecycle and setup; engine_patterns.cc: run()'s patterns; engine_ring.cc:
// the ring operations and the user-data collectives on them): the
// connections to one peer and the host buffers. Not for users of engine.h.
#pragma once

#include <array>
#include <cstddef>
#include <memory>

#include "hostengine/engine.h"
#include "hostengine/host_buffer.h"
#include "plugin/transport/transport.h"

namespace resilient::hostengine {

struct Engine::Link {
  bool sends = false;  // this rank sends to the peer
  bool recvs = false;  // this rank receives from the peer
  // Until its one connection is accepted (then closed: one connection per listen).
  std::unique_ptr<transport::Listener> listener;
  std::unique_ptr<transport::SendComm> sendComm;
  std::unique_ptr<transport::RecvComm> recvComm;
  // connect() may write to the handle between polls (NCCL's socket and IB
  // plugins keep their state there): writable, and stable across the polls.
  std::array<std::byte, transport::kHandleSize> connectHandle{};
  // The buffers registered with each comm (empty: not registered), given
  // back to their comm before it closes.
  std::array<std::unique_ptr<transport::MemoryRegion>, kBufferCount> sendMr{};
  std::array<std::unique_ptr<transport::MemoryRegion>, kBufferCount> recvMr{};
};

// Bytes of a registered buffer that one item moves, cut into pieces of
// whole `unit`s (sizeof(float) where the ring adds floats).
struct Engine::Region {
  std::byte* data = nullptr;
  size_t bytes = 0;
  size_t unit = 1;
  transport::MemoryRegion* region = nullptr;
};

struct Engine::Buffer {
  HostBuffer memory;  // at least one page, zeroed on first touch
  size_t bytes = 0;   // what the engine uses of it (what is registered)
};

}  // namespace resilient::hostengine
