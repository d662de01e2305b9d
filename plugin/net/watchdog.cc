#include "plugin/net/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plugin/net/blackbox_table.h"
#include "plugin/net/liveness/peer_link.h"

namespace resilient::net {
namespace {

liveness::ChannelOptions channelOptions(const WatchdogOptions& o) {
  liveness::ChannelOptions c;
  c.policy.timeoutMs = o.livenessTimeoutMs;
  c.policy.jobToken = o.jobToken;
  c.policy.selfPid = static_cast<uint32_t>(getpid());
  c.policy.selfHost = o.hostName;
  c.bindAddress = o.bindAddress;
  return c;
}

}  // namespace

Watchdog::Watchdog(FaultSink& sink, const WatchdogOptions& options, blackbox::Writer* blackbox,
                   const Clock& clock)
    : sink_(sink),
      livenessTimeoutMs_(options.livenessTimeoutMs),
      blackbox_(blackbox),
      clock_(clock),
      progress_(options.progressTimeoutMs, sink),
      channel_(channelOptions(options), connections_, sink) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    channel_.sayGoodbyeToAll();
  }
  if (thread_.joinable()) {
    thread_.request_stop();
    wake();
    thread_.join();
  }
  // channel_ closes its sockets as it goes (before events_, declared first).
}

void Watchdog::wake() noexcept {
  if (events_) {
    events_->wake();
  }
}

void Watchdog::ensureThreadLocked() {
  if (thread_.joinable()) {
    return;
  }
  events_.emplace();
  channel_.setEventLoop(&*events_);
  thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

uint64_t Watchdog::newListenNonce() {
  std::lock_guard<std::mutex> lock(mutex_);
  return channel_.newListenNonce();
}

uint64_t Watchdog::newConnectionKey() {
  std::lock_guard<std::mutex> lock(mutex_);
  return channel_.newConnectionKey();
}

bool Watchdog::trailerFor(uint64_t nonce, HandleTrailer* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  return channel_.trailerFor(nonce, out);
}

void Watchdog::forgetListenNonce(uint64_t nonce) {
  std::lock_guard<std::mutex> lock(mutex_);
  channel_.forgetListenNonce(nonce);
}

void Watchdog::linkTo(ConnectionRecord& conn, const HandleTrailer& trailer) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  channel_.linkTo(conn, trailer);
  wake();
}

void Watchdog::awaitLink(ConnectionRecord& conn, uint64_t key) {
  std::lock_guard<std::mutex> lock(mutex_);
  channel_.awaitLink(conn, key);
}

void Watchdog::add(ConnectionRecord* conn) {
  std::lock_guard<std::mutex> lock(mutex_);
  ensureThreadLocked();
  connections_.insert(conn);
  if (blackbox_ != nullptr) {
    conn->blackboxSlot = blackbox_->claimConnection();
  }
}

void Watchdog::remove(ConnectionRecord* conn) {
  std::lock_guard<std::mutex> lock(mutex_);
  connections_.erase(conn);
  if (blackbox_ != nullptr) {
    blackbox_->releaseConnection(conn->blackboxSlot);
  }
  channel_.detach(*conn);
}

void Watchdog::announce(const RootCause& root, uint64_t commId) {
  std::lock_guard<std::mutex> lock(mutex_);
  announceLocked(root, commId);
}

void Watchdog::announceLocked(const RootCause& root, uint64_t commId) {
  if (events_) {  // no loop yet: no link to announce on
    channel_.announce(root, commId);
  }
}

Watchdog::PeerNews Watchdog::peerNews(const ConnectionRecord& conn, bool confirm) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!events_) {
    return {};  // no loop yet: no link
  }
  PeerNews news;
  news.reason = channel_.peerReasonOf(conn, clock_.monoNs());  // reads what the link holds
  news.death = liveness::deathOf(conn);
  news.answering = liveness::answering(conn);
  if (confirm && news.answering && !news.death) {
    // A round trip, at most a tenth of the liveness timeout (100 ms by default).
    const uint64_t timeoutNs = static_cast<uint64_t>(livenessTimeoutMs_) * 100000ull;
    news.answering = channel_.probe(conn, timeoutNs);
    news.reason = channel_.peerReasonOf(conn, clock_.monoNs());
    news.death = liveness::deathOf(conn);
  }
  return news;
}

namespace {

// What `conn` (not a CollNet comm) knows of a fault on it, as a root cause:
// its own fault's, or its peer's death (the liveness channel knows it before
// NCCL tests an idle connection).
std::optional<RootCause> faultOf(const ConnectionRecord& conn) {
  if (const FaultRecord* f = conn.fault()) {
    return f->root;
  }
  const std::optional<Fault> death = liveness::deathOf(conn);
  if (!death) {
    return std::nullopt;
  }
  if (death->root) {
    return death->root;
  }
  RootCause root{death->cls, 0, "", death->detail};
  if (const liveness::PeerLink* link = conn.link.load(std::memory_order_acquire)) {
    root.pid = link->state.pid();
    if (link->state.helloSeen()) {
      root.host = link->state.host();
    }
  }
  return root;
}

bool waitingCollective(const ConnectionRecord& conn) noexcept {
  return conn.direction() == ConnectionRecord::Direction::kColl && conn.commId() != 0 &&
         conn.fault() == nullptr && conn.outstanding() > 0;
}

}  // namespace

void Watchdog::failCollectivesOfFailedComms() {
  for (ConnectionRecord* coll : connections_) {
    if (!waitingCollective(*coll)) {
      continue;
    }
    for (const ConnectionRecord* other : connections_) {
      if (other->commId() != coll->commId() ||
          other->direction() == ConnectionRecord::Direction::kColl) {
        continue;
      }
      if (std::optional<RootCause> root = faultOf(*other)) {
        Fault fault{root->cls,
                    std::string("another connection of its communicator failed (") +
                        other->directionName() + ", peer " + other->identity.peer.text +
                        "): " + describe(*root),
                    root};
        sink_.report(*coll, fault);
        break;
      }
    }
  }
}

void Watchdog::tick(uint64_t now) {
  // First: a collective of a failed communicator is that failure's, not stuck.
  failCollectivesOfFailedComms();
  for (ConnectionRecord* conn : connections_) {
    sampleBusy(*conn, now);
    if (conn->fault() != nullptr || conn->outstanding() == 0) {
      continue;
    }
    uint64_t bytes = 0;
    const bool counted = conn->inner().bytesMoved(&bytes);
    const bool progressed =
        progress_.observe(*conn, counted ? std::optional<uint64_t>(bytes) : std::nullopt, now);
    if (progressed && conn->direction() == ConnectionRecord::Direction::kRecv) {
      // Data from the peer proves its process alive, whatever its heartbeat
      // answers (a starved watchdog thread over there answers late). Sends
      // prove nothing: a frozen peer's kernel still takes bytes.
      liveness::heardFrom(*conn, now);
    }
    if (const std::optional<Fault> death = liveness::deathOf(*conn)) {
      sink_.report(*conn, *death);
      continue;
    }
    const auto liveness = liveness::answering(*conn) ? ProgressMonitor::PeerLiveness::kAnswering
                                                     : ProgressMonitor::PeerLiveness::kUnknown;
    if (progress_.failIfStuck(*conn, now, liveness)) {
      continue;
    }
    liveness::markBusy(*conn);
  }
  channel_.tick(now);
}

void Watchdog::sampleBusy(ConnectionRecord& conn, uint64_t now) noexcept {
  // The transport is asked only while the link may hold bytes: requests
  // outstanding, bytes completed since the last look, or backlogged then (an
  // idle link costs no system call).
  const uint64_t completed = conn.bytesCompleted();
  const bool mayHoldBytes =
      conn.outstanding() > 0 || completed != conn.busyBytesSeen || conn.backlogged;
  conn.busyBytesSeen = completed;
  bool busy = false;
  if (conn.sendComm() == nullptr || conn.fault() != nullptr || !mayHoldBytes ||
      !conn.sendComm()->linkBacklogged(&busy)) {
    busy = conn.outstanding() > 0;
  }
  conn.backlogged = busy;
  if (busy && conn.busySampledNs != 0 && now > conn.busySampledNs) {
    conn.busyNs += now - conn.busySampledNs;
  }
  conn.busySampledNs = now;
}

void Watchdog::run(const std::stop_token& stop) {
  const int tickMs = static_cast<int>(std::clamp<int64_t>(livenessTimeoutMs_ / 20, 5, 50));
  while (!stop.stop_requested()) {
    // The channel's events are served under the mutex, after the wait, at
    // one reading of the clock.
    std::vector<std::pair<void*, uint32_t>>& ready = ready_;
    ready.clear();
    (void)events_->wait(tickMs,
                        [&ready](void* tag, uint32_t what) { ready.emplace_back(tag, what); });
    const uint64_t now = clock_.monoNs();
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [tag, what] : ready) {
      channel_.onEvent(tag, what, now);
    }
    tick(now);
    if (blackbox_ != nullptr) {
      publishConnections(*blackbox_, connections_, now, clock_.wallNs());
    }
  }
}

}  // namespace resilient::net
