// The Engine's private parts that its source files share (engine.cc: its
// lifecycle and setup; engine_patterns.cc: run()'s patterns; engine_ring.cc:
// the ring operations and the user-data collectives on them): the
// connections to one peer and the host buffers. Not for users of engine.h.
#pragma once

#include <array>
#include <cstddef>

#include "hostengine/engine.h"
#include "plugin/transport/transport.h"

namespace resilient::hostengine {

struct Engine::Link {
  bool sends = false;  // this rank sends to the peer
  bool recvs = false;  // this rank receives from the peer
  void* listenComm = nullptr;
  void* sendComm = nullptr;
  void* recvComm = nullptr;
  // connect() may write to the handle between polls (NCCL's socket and IB
  // plugins keep their state there): writable, and stable across the polls.
  std::array<char, transport::kHandleSize> connectHandle{};
  std::array<void*, kBufferCount> sendMh{};
  std::array<bool, kBufferCount> sendRegistered{};
  std::array<void*, kBufferCount> recvMh{};
  std::array<bool, kBufferCount> recvRegistered{};
};

// Bytes of a registered buffer that one item moves, cut into pieces of
// whole `unit`s (sizeof(float) where the ring adds floats).
struct Engine::Region {
  char* data = nullptr;
  size_t bytes = 0;
  size_t unit = 1;
  void* mhandle = nullptr;
};

struct Engine::Buffer {
  char* data = nullptr;
  size_t bytes = 0;
};

}  // namespace resilient::hostengine
