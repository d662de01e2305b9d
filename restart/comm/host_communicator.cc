#include "resilient/restart/host_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>

#include "hostengine/engine.h"
#include "hostengine/loaded_plugin.h"
#include "restart/comm/active_member.h"
#include "restart/comm/collective_arrivals.h"
#include "restart/comm/net_plugin_path.h"
#include "restart/comm/rendezvous_out_of_band.h"

namespace resilient::restart {

namespace he = resilient::hostengine;

namespace {

constexpr std::chrono::milliseconds kDefaultSetupTimeout{60000};

// The plugin's commId (NCCL passes a hash of the unique id): the same on
// every rank of one communicator, different per name and iteration.
uint64_t communicatorId(const std::string& name, int iteration) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a
  auto mix = [&h](unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
  };
  for (char c : name) {
    mix(static_cast<unsigned char>(c));
  }
  for (int i = 0; i < 4; ++i) {
    mix(static_cast<unsigned char>(static_cast<unsigned>(iteration) >> (8 * i)));
  }
  return h;
}

}  // namespace

HostCommunicatorError::HostCommunicatorError(const std::string& message, int peer,
                                             std::string faultClass, bool timedOut)
    : RestartError(message), peer_(peer), faultClass_(std::move(faultClass)), timedOut_(timedOut) {}

struct HostCommunicator::Impl {
  std::string name;
  int iteration = 0;
  int rank = 0;
  int size = 1;
  std::string pluginPath;
  int abiVersion = 0;
  // Destroyed in reverse order: the engine (closing every comm and the
  // plugin context) before its out-of-band channel and the transport.
  std::unique_ptr<transport::Transport> transport;
  std::unique_ptr<comm::RendezvousOutOfBand> oob;
  std::unique_ptr<he::Engine> engine;

  std::atomic<bool> aborted{false};
  std::mutex operation;  // one operation at a time
  std::mutex faultMutex;
  std::optional<he::Fault> fault;  // the first fault an operation saw (sticky)

  // The group of this communicator's operations in the process's arrivals:
  // the same on every rank of the iteration's communicator (set once made).
  std::string arrivalsGroup;

  std::string describe() const {
    std::string text = "host comm '" + name + "' iteration " + std::to_string(iteration) +
                       " rank " + std::to_string(rank) + "/" + std::to_string(size);
    if (!pluginPath.empty()) {
      text += " (" + pluginPath + " v" + std::to_string(abiVersion) + ")";
    }
    return text;
  }

  HostCommunicatorError errorFor(const char* op, const he::Fault& f) const {
    return HostCommunicatorError(describe() + ": " + op + ": " + f.describe(), f.peer,
                                 errorKindName(f.status.kind()), f.timedOut);
  }

  RankShouldRestart abortedError(const char* op) {
    std::string text = describe() + ": " + op + ": the communicator was aborted";
    const std::lock_guard<std::mutex> lock(faultMutex);
    if (fault) {
      text += " (after a fault: " + fault->describe() + ")";
    }
    return RankShouldRestart(text);
  }

  // Runs `engineCall` (when there is an engine) or `alone` (a single rank),
  // turning its fault into the exception the header promises.
  template <class EngineCall, class Alone>
  void run(const char* op, EngineCall&& engineCall, Alone&& alone) {
    const std::lock_guard<std::mutex> lock(operation);
    if (aborted.load()) {
      throw abortedError(op);
    }
    {
      const std::lock_guard<std::mutex> faultLock(faultMutex);
      if (fault) {
        throw errorFor(op, *fault);
      }
    }
    if (!engine) {
      alone();
      return;
    }
    // Without a profiler in the plugin's library the engine's operations are
    // nobody's arrivals: they are the process's own (the health comparison's
    // stragglers and stuck ranks).
    const bool mark = !engine->profiled();
    if (mark) {
      CollectiveArrivals::process().enter(arrivalsGroup, op, rank, size);
    }
    std::optional<he::Fault> f = engineCall(*engine);
    if (mark) {
      CollectiveArrivals::process().leave(arrivalsGroup);
    }
    if (!f) {
      return;
    }
    if (f->aborted || aborted.load()) {
      throw abortedError(op);
    }
    {
      const std::lock_guard<std::mutex> faultLock(faultMutex);
      fault = *f;
    }
    throw errorFor(op, *f);
  }
};

HostCommunicator::HostCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HostCommunicator::~HostCommunicator() = default;

std::shared_ptr<HostCommunicator> HostCommunicator::create(const CommunicatorSetup& setup,
                                                           const HostCommunicatorOptions& options) {
  comm::requireActiveMember(setup, "host");
  const State& state = setup.state;
  auto impl = std::make_unique<Impl>();
  impl->name = setup.name;
  impl->iteration = state.iteration;
  impl->arrivalsGroup = "host/" + setup.name + "/" + std::to_string(state.iteration);
  impl->rank = state.activeRank;
  impl->size = state.activeWorldSize;
  if (impl->size == 1) {
    return std::shared_ptr<HostCommunicator>(new HostCommunicator(std::move(impl)));
  }

  const std::string spec = options.plugin.empty() ? comm::defaultNetPlugin() : options.plugin;
  auto loaded = he::loadPlugin(spec);
  if (!loaded.ok()) {
    throw RestartError(impl->describe() + ": cannot load the net plugin '" + spec +
                       "': " + loaded.status().toString());
  }
  impl->pluginPath = loaded.value().libraryPath;
  impl->abiVersion = loaded.value().abiVersion;
  impl->transport = std::move(std::move(loaded).value().transport);

  const std::chrono::milliseconds timeout =
      setup.timeout > std::chrono::milliseconds(0) ? setup.timeout : kDefaultSetupTimeout;
  impl->oob = std::make_unique<comm::RendezvousOutOfBand>(
      setup.rendezvous, setup.name + "/host-handles", impl->rank, timeout);
  he::EngineOptions eo;
  eo.rank = impl->rank;
  eo.nranks = impl->size;
  eo.pattern = he::Pattern::kAllReduce;
  eo.device = options.device;
  eo.timeoutMs = timeout.count();
  eo.commId = communicatorId(setup.name, state.iteration);
  impl->engine = std::make_unique<he::Engine>(*impl->transport, *impl->oob, eo);
  // A restart that begins while the setup waits (a frozen peer's handle,
  // connect or accept) ends it now; unregistered before impl can go.
  struct Unregister {
    const CommunicatorSetup& setup;
    ~Unregister() {
      if (setup.abortWith) {
        setup.abortWith(nullptr);
      }
    }
  } unregister{setup};
  if (setup.abortWith) {
    setup.abortWith([oob = impl->oob.get(), engine = impl->engine.get()] {
      oob->abort();
      engine->abort();
    });
  }
  if (std::optional<he::Fault> f =
          impl->engine->setup(std::max(options.bufferBytes, sizeof(float)))) {
    const std::string text = impl->describe() + ": connection setup: " + f->describe();
    if (f->status.kind() == ErrorKind::kTimeout) {
      throw TimeoutError(text);
    }
    throw HostCommunicatorError(text, f->peer, errorKindName(f->status.kind()), f->timedOut);
  }
  impl->oob->detach();
  impl->engine->setTimeoutMs(std::max<int64_t>(options.operationTimeout.count(), 1));
  return std::shared_ptr<HostCommunicator>(new HostCommunicator(std::move(impl)));
}

int HostCommunicator::rank() const noexcept {
  return impl_->rank;
}

int HostCommunicator::size() const noexcept {
  return impl_->size;
}

void HostCommunicator::allReduce(const float* in, float* out, size_t count) {
  impl_->run(
      "allReduce", [&](he::Engine& e) { return e.allReduceSum(in, out, count); },
      [&] {
        if (in != out && count > 0) {
          std::memmove(out, in, count * sizeof(float));
        }
      });
}

void HostCommunicator::broadcast(void* data, size_t bytes, int root) {
  if (impl_->size == 1 && root != 0) {
    throw RestartError(describe() + ": broadcast: root " + std::to_string(root) + " outside 0..0");
  }
  impl_->run(
      "broadcast", [&](he::Engine& e) { return e.broadcast(data, bytes, root); }, [] {});
}

void HostCommunicator::barrier() {
  impl_->run(
      "barrier", [](he::Engine& e) { return e.barrier(); }, [] {});
}

std::string HostCommunicator::describe() const {
  return impl_->describe();
}

void HostCommunicator::abort() noexcept {
  impl_->aborted.store(true);
  if (impl_->engine) {
    impl_->engine->abort();
  }
}

std::optional<std::string> HostCommunicator::asyncError() noexcept {
  try {
    const std::lock_guard<std::mutex> lock(impl_->faultMutex);
    if (impl_->fault) {
      return impl_->fault->describe();
    }
    return std::nullopt;
  } catch (...) {
    return std::string("host communicator: cannot describe its fault (out of memory)");
  }
}

std::string HostCommunicator::pluginPath() const {
  return impl_->pluginPath;
}

CommunicatorFactory hostCommunicatorFactory(HostCommunicatorOptions options) {
  return [options = std::move(options)](const CommunicatorSetup& setup) -> CommunicatorPtr {
    return HostCommunicator::create(setup, options);
  };
}

}  // namespace resilient::restart
