#include "resilient/restart/nccl_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "resilient/restart/errors.hpp"
#include "restart/comm/active_member.h"
#include "restart/comm/nccl_library.h"

namespace resilient::restart {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kDefaultCreateTimeout{60000};

enum class CommState { kLive, kRevoked, kAborted };

const char* stateName(CommState s) noexcept {
  switch (s) {
    case CommState::kLive: return "live";
    case CommState::kRevoked: return "revoked";
    case CommState::kAborted: return "aborted";
  }
  return "?";
}

std::string millis(std::chrono::milliseconds t) {
  return std::to_string(t.count()) + " ms";
}

// Polls until NCCL is done with the communicator's pending work: its async
// result, or ncclInProgress when `deadline` passed first. `waiting` (may be
// null) is told at every poll (the rendezvous: the rank is not hung).
ncclResult_t waitReady(const comm::NcclLibrary& lib, ncclComm_t comm, Clock::time_point deadline,
                       std::chrono::milliseconds interval, Rendezvous* waiting = nullptr) {
  for (;;) {
    if (waiting != nullptr) {
      waiting->waiting();
    }
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = lib.commGetAsyncError(comm, &state);
    if (r != ncclSuccess) {
      return r;
    }
    if (state != ncclInProgress) {
      return state;
    }
    if (Clock::now() >= deadline) {
      return ncclInProgress;
    }
    std::this_thread::sleep_for(std::max(interval, std::chrono::milliseconds(0)));
  }
}

// NCCL's defaults everywhere ("undefined"), non-blocking, and our names.
ncclConfig_t makeConfig(const std::string& netName, const std::string& commName) {
  ncclConfig_t c;
  std::memset(&c, 0, sizeof(c));
  c.size = sizeof(ncclConfig_t);
  c.magic = NCCL_CONFIG_MAGIC_VALUE;
  c.version = NCCL_API_VERSION_CODE(2, 28, 0);  // the layout include/nccl/config.h describes
  c.blocking = 0;
  c.cgaClusterSize = NCCL_CONFIG_UNDEF_INT;
  c.minCTAs = NCCL_CONFIG_UNDEF_INT;
  c.maxCTAs = NCCL_CONFIG_UNDEF_INT;
  c.netName = netName.empty() ? nullptr : netName.c_str();
  c.splitShare = NCCL_CONFIG_UNDEF_INT;
  c.trafficClass = NCCL_CONFIG_UNDEF_INT;
  c.commName = commName.empty() ? nullptr : commName.c_str();
  c.collnetEnable = NCCL_CONFIG_UNDEF_INT;
  c.CTAPolicy = NCCL_CONFIG_UNDEF_INT;
  c.shrinkShare = NCCL_CONFIG_UNDEF_INT;
  c.nvlsCTAs = NCCL_CONFIG_UNDEF_INT;
  c.nChannelsPerNetPeer = NCCL_CONFIG_UNDEF_INT;
  c.nvlinkCentricSched = NCCL_CONFIG_UNDEF_INT;
  return c;
}

std::string pointerText(const void* p) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", p);
  return text;
}

}  // namespace

struct NcclCommunicator::Impl {
  std::shared_ptr<const comm::NcclLibrary> lib;
  NcclOptions options;
  std::string name;
  std::string commName;  // ncclConfig_t.commName points here
  int iteration = 0;
  int rank = 0;
  int size = 0;
  bool shrunk = false;
  bool grown = false;
  // Where NCCL's own thread stores what a non-blocking creation made, after
  // the call returned (NCCL: init.cc ncclCommInitRankFunc's exit,
  // __atomic_store_n(job->newcomm, ...)): the child of a shrink of this
  // communicator (ncclCommInitChildComm sets *newcomm to NULL and attaches
  // the job to this parent), and this communicator itself when a grow made it
  // (stored at the call and again when its job ends). Members, so that the
  // slot outlives the job: the parent is aborted before it is freed, and
  // ncclCommAbort joins a pending job (ncclCommEnsureReady under the abort
  // flag -> ncclGroupJobAbort); a grown communicator is aborted on every
  // failure before this object goes.
  ncclComm_t shrinkOut = nullptr;
  ncclComm_t growOut = nullptr;
  // Adopted (the user's or torch's handle): watched, revoked on abort where
  // NCCL can, never aborted or destroyed by us (its owner frees it).
  bool adopted = false;

  // Writes under `mutex`; reads of the two atomics need no lock.
  std::mutex mutex;
  std::atomic<ncclComm_t> comm{nullptr};
  std::atomic<CommState> state{CommState::kLive};

  std::string describe() const {
    std::string text =
        "nccl comm '" + name + "' iteration " + std::to_string(iteration) + " rank " +
        std::to_string(rank) + "/" + std::to_string(size) + " (" + pointerText(comm.load()) +
        ", NCCL " + lib->version().text() + ", " +
        (comm.load() == nullptr && state.load() == CommState::kLive ? "not created"
                                                                    : stateName(state.load())) +
        (shrunk ? ", shrunk" : "") + (grown ? ", grown" : "") + ")";
    return text;
  }

  std::string failure(const char* call, ncclResult_t r, ncclComm_t c) const {
    std::string text = describe() + ": " + call + " failed: " + lib->describe(r);
    const std::string last = lib->lastError(c);
    if (!last.empty()) {
      text += "; NCCL: " + last;
    }
    return text;
  }

  // One run of NcclCommunicator::create (below).
  struct Creation;
};

namespace {

// This rank's place in the previous NCCL communicator.
struct OldComm {
  int rank = 0;
  int size = 0;
  ncclComm_t comm = nullptr;
  bool aborted = false;  // freed by ncclCommAbort
};

// May this rank shrink `previous` into the new communicator? Checks what a
// shrink needs: NCCL's ncclCommShrink, a previous NCCL communicator of the
// same library that still exists (revoked or live, not freed by
// ncclCommAbort), and ranks that only closed up.
bool canShrink(const CommunicatorSetup& setup, const NcclCommunicator* previous,
               const comm::NcclLibrary& lib, const OldComm& old, int joiners = 0) {
  if (previous == nullptr || old.comm == nullptr || old.aborted || !lib.hasShrink() ||
      setup.removedRanks.empty()) {
    return false;
  }
  std::vector<int> removed = setup.removedRanks;
  std::sort(removed.begin(), removed.end());
  if (std::adjacent_find(removed.begin(), removed.end()) != removed.end() || removed.front() < 0 ||
      removed.back() >= old.size) {
    return false;
  }
  if (std::binary_search(removed.begin(), removed.end(), old.rank)) {
    return false;
  }
  const auto below = std::lower_bound(removed.begin(), removed.end(), old.rank) - removed.begin();
  return old.rank - below == setup.state.activeRank &&
         old.size - static_cast<int>(removed.size()) + joiners == setup.state.activeWorldSize;
}

// Do the joiners take exactly the last ranks of the new communicator (what
// ncclCommGrow gives them)?
bool joinersLast(const CommunicatorSetup& setup) {
  const int w = setup.state.activeWorldSize;
  const auto n = static_cast<int>(setup.joinedRanks.size());
  if (n == 0 || n >= w) {
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (setup.joinedRanks[static_cast<size_t>(i)] != w - n + i) {
      return false;
    }
  }
  return true;
}

// May this member, which was in the previous communicator, grow it (after a
// shrink when ranks left)? It must exist, and the others only closed up.
bool canKeep(const CommunicatorSetup& setup, const NcclCommunicator* previous,
             const comm::NcclLibrary& lib, const OldComm& old) {
  const auto joiners = static_cast<int>(setup.joinedRanks.size());
  if (previous == nullptr || old.comm == nullptr || old.aborted || !lib.hasGrow()) {
    return false;
  }
  if (setup.removedRanks.empty()) {
    return old.rank == setup.state.activeRank && old.size + joiners == setup.state.activeWorldSize;
  }
  return canShrink(setup, previous, lib, old, joiners);
}

// Frees a communicator: a live one is finalized first (its work flushed),
// a revoked one settles, both polled until `deadline`; then ncclCommAbort,
// whatever the state. Never ncclCommDestroy: it begins a group and returns
// from inside it when the communicator is not ready or carries an error
// (NCCL: init.cc ncclCommDestroy, NCCLCHECK(ncclCommEnsureReady(comm))
// before ncclGroupEndInternal; a revoked communicator keeps its proxy's
// error), and every later collective of this thread then only joins that
// group, never launched (group.cc ncclGroupEndInternal). After a finalize or
// a revoke, ncclCommAbort does what destroy would (commReclaim skips
// commDestroySync once finalizeCalled), and it ends its group whatever the
// state (init.cc ncclCommAbort).
void freeComm(const comm::NcclLibrary& lib, ncclComm_t c, bool live, Clock::time_point deadline,
              std::chrono::milliseconds interval) {
  if (live) {
    const ncclResult_t r = lib.commFinalize(c);
    if (r == ncclSuccess || r == ncclInProgress) {
      (void)waitReady(lib, c, deadline, interval);
    }
  } else {
    (void)waitReady(lib, c, deadline, interval);
  }
  (void)lib.commAbort(c);
}

// Times one NCCL call into the timeline: "ncclCommShrink 2.31 ms".
void recordCall(const CommunicatorSetup& setup, const char* call, Clock::time_point start,
                ncclResult_t r) {
  if (!setup.record) {
    return;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  char text[160];
  std::snprintf(text, sizeof(text), "%s %.2f ms%s", call, ms, r == ncclSuccess ? "" : " (failed)");
  setup.record("nccl call", text);
}

}  // namespace

// One run of NcclCommunicator::create for `impl`: its deadline and config, and
// the shrunk communicator a grow starts from until the new one is ready.
struct NcclCommunicator::Impl::Creation {
  // The path, decided together, since every member must make the matching
  // call: shrink (only removals), shrink then grow (removals, and spares
  // joined as the last ranks), or a full init.
  enum class Path { kInit, kShrink, kGrow };

  Creation(const CommunicatorSetup& s, const NcclOptions& o, Impl& i)
      : setup(s),
        options(o),
        impl(i),
        lib(*i.lib),
        timeout(s.timeout > std::chrono::milliseconds(0) ? s.timeout : kDefaultCreateTimeout),
        deadline(Clock::now() + timeout),
        config(makeConfig(o.netName, i.commName)),
        joiner(std::binary_search(s.joinedRanks.begin(), s.joinedRanks.end(), s.state.activeRank)) {
  }

  const CommunicatorSetup& setup;
  const NcclOptions& options;
  Impl& impl;
  const comm::NcclLibrary& lib;
  const std::chrono::milliseconds timeout;
  const Clock::time_point deadline;
  ncclConfig_t config;
  const bool joiner;  // a spare joined as one of the last ranks
  // The shrunk communicator a grow starts from (ours to free): aborted on any
  // failure, finalized and destroyed once the grow is done with it.
  ncclComm_t shrunk = nullptr;

  std::chrono::milliseconds remaining() const {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  }

  void abortShrunk() {
    if (shrunk != nullptr) {
      (void)lib.commAbort(shrunk);
      shrunk = nullptr;
    }
  }

  // The id active rank 0 published under `key` (its failure text otherwise).
  ncclUniqueId awaitId(const std::string& key, const char* what) {
    const std::string value = setup.rendezvous.lookup(key, remaining());
    if (value.size() != sizeof(ncclUniqueId::internal)) {
      abortShrunk();
      throw RestartError(impl.describe() + ": no NCCL " + what + " from active rank 0: " + value);
    }
    ncclUniqueId id;
    std::memcpy(id.internal, value.data(), sizeof(id.internal));
    return id;
  }

  // A creation call that did not get ready: TimeoutError when still in
  // progress at the deadline, RestartError with NCCL's words otherwise; `c`
  // is aborted (after its last error was read).
  [[noreturn]] void notReady(const char* what, ncclResult_t ready, ncclComm_t c) {
    const std::string text = ready == ncclInProgress
                                 ? impl.describe() + ": " + what + " did not complete within " +
                                       millis(timeout) + "; aborted"
                                 : impl.failure(what, ready, c);
    if (c != nullptr) {
      (void)lib.commAbort(c);
    }
    abortShrunk();
    if (ready == ncclInProgress) {
      throw TimeoutError(text);
    }
    throw RestartError(text);
  }

  // This member's vote: "init", "join" (a joiner), or, when `previous` settled
  // clean, "shrink" or "keep" (grow it). Locks previous's mutex when it is
  // this library's.
  std::string vote(NcclCommunicator* previous, bool mayShrink, bool mayGrow,
                   std::unique_lock<std::mutex>& previousLock) {
    if (joiner) {
      return mayGrow && lib.hasGrow() ? "join" : "init";
    }
    if (previous == nullptr || previous->impl_->lib != impl.lib) {
      return "init";
    }
    previousLock = std::unique_lock<std::mutex>(previous->impl_->mutex);
    const Impl& p = *previous->impl_;
    const OldComm old{.rank = p.rank,
                      .size = p.size,
                      .comm = p.comm.load(),
                      .aborted = p.state.load() == CommState::kAborted};
    const bool shrinkable = mayShrink && canShrink(setup, previous, lib, old);
    const bool keepable = !shrinkable && mayGrow && canKeep(setup, previous, lib, old);
    // A shrink (and a grow's shrink) needs a parent that settled clean:
    // ncclCommInitChildComm calls ncclCommEnsureReady(parent), which
    // returns the parent's proxy error of the failed transfer, kept
    // through the revoke (NCCL: init.cc ncclCommGetAsyncError reads
    // proxyState->asyncResult, which nothing clears). Such a member votes
    // for a full init, which every member then makes in this restart.
    if (shrinkable || keepable) {
      const ncclResult_t settled =
          waitReady(lib, old.comm, deadline, options.pollInterval, &setup.rendezvous);
      if (settled == ncclSuccess) {
        return shrinkable ? "shrink" : "keep";
      }
      if (setup.record) {
        setup.record("nccl previous", p.describe() + " reads " + lib.describe(settled) +
                                          ": NCCL would refuse to shrink it");
      }
    }
    return "init";
  }

  // Every member's vote gathered: the path they all take.
  Path choosePath(NcclCommunicator* previous, std::unique_lock<std::mutex>& previousLock) {
    const bool mayShrink = setup.onlyRemovals && options.useShrink;
    const bool mayGrow = !setup.onlyRemovals && !setup.removedRanks.empty() && options.useShrink &&
                         options.useGrow && joinersLast(setup);
    if (!mayShrink && !mayGrow) {
      return Path::kInit;
    }
    const std::string mine = vote(previous, mayShrink, mayGrow, previousLock);
    const std::vector<std::string> votes =
        setup.rendezvous.allGather(setup.name + "/nccl-create", mine, remaining());
    const auto all = [&](auto pred) { return std::all_of(votes.begin(), votes.end(), pred); };
    if (mayShrink && all([](const std::string& v) { return v == "shrink"; })) {
      return Path::kShrink;
    }
    if (mayGrow && all([](const std::string& v) { return v == "keep" || v == "join"; }) &&
        std::count(votes.begin(), votes.end(), "keep") > 0) {
      return Path::kGrow;
    }
    return Path::kInit;
  }

  // ncclCommShrink of `p` (the previous communicator), waited for: the new
  // communicator (kShrink) or the one a grow starts from (`shrunk`). What
  // ncclCommShrink returned.
  ncclResult_t shrink(Impl& p, Path path, ncclComm_t& newComm) {
    // The parent settled clean before the vote. A non-blocking shrink
    // returns ncclSuccess with the child still NULL (NCCL: init.cc
    // ncclCommInitChildComm sets *newcomm = NCCL_COMM_NULL; the group's
    // ncclInProgress passes NCCLCHECK): its job, attached to the parent, stores
    // the child into the parent's slot when it ends. NCCL's recipe polls the
    // parent (docs/userguide usage/communicators.rst, "shrink"), then the child.
    ncclComm_t parent = p.comm.load();
    std::vector<int> excluded = setup.removedRanks;
    const Clock::time_point start = Clock::now();
    __atomic_store_n(&p.shrinkOut, nullptr, __ATOMIC_RELEASE);
    const ncclResult_t r =
        lib.commShrink(parent, excluded.data(), static_cast<int>(excluded.size()), &p.shrinkOut,
                       &config, NCCL_SHRINK_ABORT);
    recordCall(setup, "ncclCommShrink", start, r == ncclInProgress ? ncclSuccess : r);
    ncclResult_t ready = r;
    if (r == ncclSuccess || r == ncclInProgress) {
      ready = waitReady(lib, parent, deadline, options.pollInterval, &setup.rendezvous);
    }
    // Ours once it is there, whatever the parent says (the job stores it
    // on failure too).
    shrunk = ready == ncclInProgress ? nullptr
                                     : __atomic_exchange_n(&p.shrinkOut, nullptr, __ATOMIC_ACQ_REL);
    if (ready == ncclSuccess && shrunk == nullptr) {
      throw RestartError(p.describe() + ": ncclCommShrink's job ended without a communicator");
    }
    if (ready == ncclSuccess) {
      ready = waitReady(lib, shrunk, deadline, options.pollInterval, &setup.rendezvous);
    }
    if (ready != ncclSuccess) {
      ncclComm_t failed = std::exchange(shrunk, nullptr);
      notReady("ncclCommShrink", ready, failed);
    }
    recordCall(setup, "ncclCommShrink done", start, ncclSuccess);
    if (path == Path::kShrink) {
      newComm = std::exchange(shrunk, nullptr);
      impl.shrunk = true;
    }
    return r;
  }

  // ncclCommGrow: active rank 0 publishes the grow id from `shrunk`, the
  // joiners and the other members wait for it. What ncclCommGrow returned.
  ncclResult_t grow(ncclComm_t& newComm) {
    const std::string idKey = setup.name + "/nccl-grow-id";
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    const Clock::time_point start = Clock::now();
    ncclResult_t r = ncclSuccess;
    if (joiner) {
      id = awaitId(idKey, "grow id");
      r = lib.commGrow(nullptr, impl.size, &id, impl.rank, &impl.growOut, &config);
    } else if (impl.rank == 0) {
      r = lib.commGetUniqueId(shrunk, &id);
      if (r != ncclSuccess) {
        const std::string text = impl.failure("ncclCommGetUniqueId", r, shrunk);
        setup.rendezvous.publish(idKey, text);  // the others learn why there is none
        abortShrunk();
        throw RestartError(text);
      }
      setup.rendezvous.publish(idKey, std::string_view(id.internal, sizeof(id.internal)));
      r = lib.commGrow(shrunk, impl.size, &id, -1, &impl.growOut, &config);
    } else {
      // Only the root's id lets the joiners in: without it this grow would
      // wait for them until the deadline.
      (void)awaitId(idKey, "grow id");
      r = lib.commGrow(shrunk, impl.size, nullptr, -1, &impl.growOut, &config);
    }
    // Stored before the call returned (NCCL: v2.29.7-1 init.cc ncclCommGrow),
    // and again by its job.
    newComm = __atomic_load_n(&impl.growOut, __ATOMIC_ACQUIRE);
    recordCall(setup, "ncclCommGrow", start, r == ncclInProgress ? ncclSuccess : r);
    impl.grown = true;
    return r;
  }

  // ncclCommInitRankConfig with the unique id active rank 0 publishes. What it
  // returned.
  ncclResult_t init(ncclComm_t& newComm) {
    const std::string idKey = setup.name + "/nccl-unique-id";
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (impl.rank == 0) {
      const ncclResult_t r = lib.getUniqueId(&id);
      if (r != ncclSuccess) {
        const std::string text = impl.failure("ncclGetUniqueId", r, nullptr);
        // Anything but an id tells the other members why there is none.
        setup.rendezvous.publish(idKey, text);
        throw RestartError(text);
      }
      setup.rendezvous.publish(idKey, std::string_view(id.internal, sizeof(id.internal)));
    } else {
      id = awaitId(idKey, "unique id");
    }
    const Clock::time_point start = Clock::now();
    const ncclResult_t r = lib.commInitRankConfig(&newComm, impl.size, id, impl.rank, &config);
    recordCall(setup, "ncclCommInitRankConfig", start, r == ncclInProgress ? ncclSuccess : r);
    return r;
  }

  // The new communicator along `path`, ready; the shrunk one a grow started
  // from freed.
  ncclComm_t make(Path path, NcclCommunicator* previous) {
    ncclComm_t newComm = nullptr;
    ncclResult_t r = ncclSuccess;
    const char* call = path == Path::kShrink ? "ncclCommShrink"
                       : path == Path::kGrow ? "ncclCommGrow"
                                             : "ncclCommInitRankConfig";
    if (path == Path::kShrink || (path == Path::kGrow && !joiner)) {
      r = shrink(*previous->impl_, path, newComm);
    }
    if (path == Path::kGrow) {
      r = grow(newComm);
    } else if (path == Path::kInit) {
      r = init(newComm);
    }
    if (r != ncclSuccess && r != ncclInProgress) {
      notReady(call, r, newComm);
    }
    const Clock::time_point waitStart = Clock::now();
    r = waitReady(lib, newComm, deadline, options.pollInterval, &setup.rendezvous);
    if (r != ncclSuccess) {
      notReady(call, r, newComm);
    }
    recordCall(setup, (std::string(call) + " done").c_str(), waitStart, ncclSuccess);
    if (shrunk != nullptr) {  // the grow is done with it
      freeComm(lib, std::exchange(shrunk, nullptr), true, Clock::now() + options.destroyTimeout,
               options.pollInterval);
    }
    return newComm;
  }
};

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::shared_ptr<NcclCommunicator> NcclCommunicator::create(const CommunicatorSetup& setup,
                                                           const NcclOptions& options) {
  comm::requireActiveMember(setup, "nccl");
  const State& state = setup.state;
  auto impl = std::make_unique<Impl>();
  impl->lib = comm::NcclLibrary::load(options.library);
  impl->options = options;
  impl->name = setup.name;
  impl->commName = options.commName.empty() ? setup.name + "/" + std::to_string(state.iteration)
                                            : options.commName;
  impl->iteration = state.iteration;
  impl->rank = state.activeRank;
  impl->size = state.activeWorldSize;
  Impl::Creation creation(setup, options, *impl);
  using Path = Impl::Creation::Path;

  auto* previous = dynamic_cast<NcclCommunicator*>(setup.previous.get());
  std::unique_lock<std::mutex> previousLock;  // held until the new communicator is ready
  const Path path = creation.choosePath(previous, previousLock);
  if (path == Path::kInit) {
    previousLock = {};
  }
  if (setup.record) {
    setup.record("nccl path", path == Path::kShrink ? "ncclCommShrink"
                              : path == Path::kGrow ? "ncclCommShrink + ncclCommGrow"
                                                    : "ncclCommInitRankConfig");
  }
  impl->comm.store(creation.make(path, previous));
  return std::shared_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl)));
}

std::shared_ptr<NcclCommunicator> NcclCommunicator::adopt(ncclComm* handle, const State& state,
                                                          const std::string& name,
                                                          const NcclOptions& options) {
  if (handle == nullptr) {
    throw ConfigError("NcclCommunicator::adopt: a null communicator handle");
  }
  auto impl = std::make_unique<Impl>();
  impl->lib = comm::NcclLibrary::load(options.library);
  impl->options = options;
  impl->name = name;
  impl->iteration = state.iteration;
  impl->rank = state.activeRank;
  impl->size = state.activeWorldSize;
  impl->adopted = true;
  impl->comm.store(handle);
  return std::shared_ptr<NcclCommunicator>(new NcclCommunicator(std::move(impl)));
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  const std::lock_guard<std::mutex> lock(m.mutex);
  ncclComm_t c = m.comm.load();
  if (c == nullptr || m.state.load() == CommState::kAborted || m.adopted) {
    return;
  }
  // Revoked: the revoke settles (it reads success once quiescent).
  freeComm(*m.lib, c, m.state.load() == CommState::kLive, Clock::now() + m.options.destroyTimeout,
           m.options.pollInterval);
  m.comm.store(nullptr);
  // A shrink's child nobody took (its creation gave up while the job ran;
  // the abort above joined the job, so the slot is final now).
  if (ncclComm_t orphan = __atomic_exchange_n(&m.shrinkOut, nullptr, __ATOMIC_ACQ_REL)) {
    (void)m.lib->commAbort(orphan);
  }
}

ncclComm* NcclCommunicator::handle() const noexcept {
  return impl_->comm.load();
}

int NcclCommunicator::rank() const noexcept {
  return impl_->rank;
}

int NcclCommunicator::size() const noexcept {
  return impl_->size;
}

bool NcclCommunicator::shrunk() const noexcept {
  return impl_->shrunk;
}

bool NcclCommunicator::grown() const noexcept {
  return impl_->grown;
}

std::string NcclCommunicator::ncclVersion() const {
  return impl_->lib->version().text();
}

std::string NcclCommunicator::libraryPath() const {
  return impl_->lib->path();
}

std::string NcclCommunicator::describe() const {
  return impl_->describe();
}

void NcclCommunicator::abort() noexcept {
  Impl& m = *impl_;
  const std::lock_guard<std::mutex> lock(m.mutex);
  ncclComm_t c = m.comm.load();
  if (c == nullptr || m.state.load() != CommState::kLive) {
    return;
  }
  const comm::NcclLibrary& lib = *m.lib;
  if (m.options.useRevoke && lib.hasRevoke()) {
    const ncclResult_t r = lib.commRevoke(c, NCCL_REVOKE_DEFAULT);
    if (r == ncclSuccess || r == ncclInProgress) {
      m.state.store(CommState::kRevoked);
      return;
    }
  }
  if (m.adopted) {
    // Its owner aborts it (ncclCommAbort frees it, under the owner's feet).
    m.state.store(CommState::kRevoked);
    return;
  }
  (void)lib.commAbort(c);
  m.state.store(CommState::kAborted);
  m.comm.store(nullptr);
}

// NCCL's group depth is per thread (group.cc: __thread ncclGroupDepth) and
// not readable; ncclGroupEnd tells it: ncclInvalidUsage ("not in a group
// call", also a WARN in NCCL's log) proves depth 0; anything else means a
// group was left open (and this call closed one level of it).
std::optional<std::string> NcclCommunicator::checkThread() noexcept {
  try {
    const ncclResult_t r = impl_->lib->groupEnd();
    if (r == ncclInvalidUsage) {
      return std::nullopt;
    }
    return "NCCL " + impl_->lib->version().text() +
           ": this thread was inside an NCCL group that nobody ended (ncclGroupEnd returned " +
           impl_->lib->describe(r) +
           ", not ncclInvalidUsage): an ncclGroupStart without its ncclGroupEnd (an exception "
           "inside a group, an interrupted torch coalescing or batch_isend_irecv) or an "
           "ncclCommDestroy of a communicator in error; every later NCCL call of this thread "
           "would only join that group and never launch";
  } catch (...) {
    return std::string("NCCL group check: out of memory");
  }
}

std::optional<std::string> NcclCommunicator::asyncError() noexcept {
  Impl& m = *impl_;
  try {
    // An abort under way holds the lock; there is nothing new to report then.
    const std::unique_lock<std::mutex> lock(m.mutex, std::try_to_lock);
    if (!lock.owns_lock() || m.state.load() != CommState::kLive) {
      return std::nullopt;
    }
    ncclComm_t c = m.comm.load();
    ncclResult_t state = ncclSuccess;
    const ncclResult_t r = m.lib->commGetAsyncError(c, &state);
    if (r != ncclSuccess) {
      return m.failure("ncclCommGetAsyncError", r, c);
    }
    if (state == ncclSuccess || state == ncclInProgress) {
      return std::nullopt;
    }
    return m.describe() + ": " + m.lib->describe(state) + "; NCCL: " + m.lib->lastError(c);
  } catch (...) {
    return std::string("nccl communicator: cannot describe its error (out of memory)");
  }
}

CommunicatorFactory ncclCommunicatorFactory(NcclOptions options) {
  return [options = std::move(options)](const CommunicatorSetup& setup) -> CommunicatorPtr {
    return NcclCommunicator::create(setup, options);
  };
}

}  // namespace resilient::restart
