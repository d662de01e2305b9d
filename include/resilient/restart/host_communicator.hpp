// HostCommunicator: the communicator of runs without a GPU (docs/design.md, "The
// host engine"). It moves the user's host data through a real NCCL net
// plugin .so, loaded and driven exactly as NCCL drives it (by default
// libnccl-net-resilient.so), with the host engine's ring: sum all-reduce of
// floats, broadcast and barrier. It is test and demo infrastructure, never
// NCCL: GPU jobs use NcclCommunicator.
//
// Ranks are the iteration's active ranks (State::activeRank of
// State::activeWorldSize). The connections are built while the factory
// runs: listen handles are exchanged through the iteration's Rendezvous.
//
// Operations run on one thread at a time and block until done. They throw
//  - RankShouldRestart once abort() was called (from any thread: an
//    operation blocked inside returns within microseconds of the call);
//  - HostCommunicatorError when the engine saw a fault: the call that
//    failed, the peer it blames (an active rank) and the fault's class,
//    with the net plugin's own diagnosis when it logged one.
// After a fault or an abort every later operation throws at once; the
// destructor closes every connection and the plugin context (NCCL's close
// on abort) and unloads the plugin when no other communicator uses it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "resilient/restart/communicator.hpp"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/visibility.h"

RESILIENT_RESTART_API_BEGIN
namespace resilient::restart {

struct HostCommunicatorOptions {
  // The net plugin, as NCCL_NET_PLUGIN names it: a plugin name
  // ("resilient" -> libnccl-net-resilient.so), a library name or a path.
  // Empty: libnccl-net-resilient.so next to the restart library, else the
  // loader's search path.
  std::string plugin;
  int device = 0;  // the plugin's device index
  // Largest block of user data copied through the registered buffers per step.
  size_t bufferBytes = size_t{4} << 20;
  // Backstop deadline of one operation; the net plugin's stall detection
  // (NCCL_RESILIENT_LIVENESS_TIMEOUT_MS, NCCL_RESILIENT_PROGRESS_TIMEOUT_MS)
  // normally reports a dead or stuck peer first.
  std::chrono::milliseconds operationTimeout{300000};
};

// A fault the engine saw in an operation or while connecting.
class HostCommunicatorError : public RestartError {
 public:
  HostCommunicatorError(const std::string& message, int peer, std::string faultClass,
                        bool timedOut);
  // The active rank at the other end of the failed connection; -1 if none.
  int peer() const noexcept { return peer_; }
  // "remote error", "system error", "timeout", "internal error", "invalid usage".
  const std::string& faultClass() const noexcept { return faultClass_; }
  // The engine's own deadline passed (nothing reported by the plugin).
  bool timedOut() const noexcept { return timedOut_; }

 private:
  int peer_;
  std::string faultClass_;
  bool timedOut_;
};

class HostCommunicator final : public Communicator {
 public:
  // Builds the connections among the active ranks (collective over them).
  // Throws RestartError (plugin cannot be loaded), TimeoutError (a rank did
  // not take part in time) or HostCommunicatorError (connection setup).
  static std::shared_ptr<HostCommunicator> create(const CommunicatorSetup& setup,
                                                  const HostCommunicatorOptions& options);
  ~HostCommunicator() override;
  HostCommunicator(const HostCommunicator&) = delete;
  HostCommunicator& operator=(const HostCommunicator&) = delete;

  int rank() const noexcept;
  int size() const noexcept;
  // out[i] = sum over the ranks of in[i], i < count; in == out is allowed.
  void allReduce(const float* in, float* out, size_t count);
  // root's bytes at `data` into every rank's `data`.
  void broadcast(void* data, size_t bytes, int root);
  // Returns once every rank entered it.
  void barrier();

  // "host comm 'dp' iteration 2 rank 1/3 (libnccl-net-resilient.so v11)"
  std::string describe() const override;
  void abort() noexcept override;
  // The last fault an operation saw (not an abort), or nullopt.
  std::optional<std::string> asyncError() noexcept override;

  // The net plugin library loaded; empty for a single rank (no plugin needed).
  std::string pluginPath() const;

 private:
  struct Impl;
  explicit HostCommunicator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The factory for Options::communicators.
CommunicatorFactory hostCommunicatorFactory(HostCommunicatorOptions options = {});

}  // namespace resilient::restart
RESILIENT_RESTART_API_END
