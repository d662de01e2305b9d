// A liveness link on one socket (liveness/stream_link.h), the restart
// library's rank-to-monitor link: two ends over a socket pair, driven by the
// test as their owners' poll loops drive them, with a clock the test moves.
// The rules are the net plugin's (liveness/peer_state.h); what is checked
// here is that the single-socket driver applies them: the handshake, answers,
// silence of a frozen end, goodbye versus an end that vanishes, a wrong token.
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <catch2/catch.hpp>

#include "plugin/net/liveness/stream_link.h"

using namespace resilient;
using namespace resilient::net;
using namespace resilient::net::liveness;

namespace {

constexpr uint64_t kMs = 1000000;

Policy policyOf(const char* token, uint32_t pid) {
  Policy p;
  p.timeoutMs = 1000;
  p.jobToken = token;
  p.selfPid = pid;
  p.selfHost = "node-a";
  return p;
}

struct Pair {
  int fds[2] = {-1, -1};
  Pair() { REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0); }
};

// One exchange round at `now`: each end reads what the other wrote.
void exchange(StreamLink& monitor, StreamLink& rank, uint64_t now) {
  for (int i = 0; i < 3; ++i) {
    rank.onReadable(now);
    monitor.onReadable(now);
  }
}

}  // namespace

TEST_CASE("a stream link: handshake, answered pings, no silence while the other end answers",
          "[liveness-stream]") {
  Pair pair;
  StreamLink monitor(policyOf("tok", 100), true, pair.fds[0], "rank 3 (pid 200)");
  StreamLink rank(policyOf("tok", 200), false, pair.fds[1], "its monitor process");
  uint64_t now = 1000 * kMs;
  exchange(monitor, rank, now);
  CHECK(monitor.state().authenticated());
  CHECK(rank.state().authenticated());
  CHECK(monitor.state().pid() == 200);
  CHECK(rank.state().pid() == 100);
  for (int i = 0; i < 40; ++i) {  // 10 s of ticks at 250 ms
    CHECK_FALSE(monitor.tick(now).has_value());
    exchange(monitor, rank, now);
    now = monitor.nextTickNs(now);
  }
  CHECK(monitor.open());
  CHECK(rank.open());
}

TEST_CASE(
    "a stream link: an end that stops reading (frozen) is silent past the timeout, "
    "named as the net plugin names an unresponsive peer",
    "[liveness-stream]") {
  Pair pair;
  StreamLink monitor(policyOf("tok", 100), true, pair.fds[0], "rank 3 (pid 200)");
  StreamLink rank(policyOf("tok", 200), false, pair.fds[1], "its monitor process");
  uint64_t now = 1000 * kMs;
  exchange(monitor, rank, now);
  REQUIRE_FALSE(monitor.tick(now).has_value());
  exchange(monitor, rank, now);
  const uint64_t frozenAt = now;
  std::optional<uint64_t> silent;
  while (!silent) {  // the rank's end reads nothing any more
    now += 250 * kMs;
    monitor.onReadable(now);
    silent = monitor.tick(now);
    REQUIRE(now - frozenAt <= 2000 * kMs);
  }
  // The timeout (1 s) plus at most one ping interval.
  CHECK(now - frozenAt > 1000 * kMs);
  CHECK(now - frozenAt <= 1250 * kMs);
  const Fault f = monitor.silenceFault(*silent);
  CHECK(f.cls == FaultClass::kPeerUnresponsive);
  CHECK(f.detail.find("threshold 1000 ms") != std::string::npos);
}

TEST_CASE("a stream link: goodbye is an orderly close, a vanished end is a death",
          "[liveness-stream]") {
  SECTION("goodbye") {
    Pair pair;
    StreamLink monitor(policyOf("tok", 100), true, pair.fds[0], "rank 3");
    StreamLink rank(policyOf("tok", 200), false, pair.fds[1], "its monitor process");
    exchange(monitor, rank, kMs);
    rank.goodbye();
    monitor.onReadable(2 * kMs);
    CHECK(monitor.state().phase() == PeerState::Phase::kClosed);
    CHECK(monitor.state().deathReason().empty());
  }
  SECTION("the other end closes without goodbye") {
    Pair pair;
    StreamLink monitor(policyOf("tok", 100), true, pair.fds[0], "rank 3");
    {
      StreamLink rank(policyOf("tok", 200), false, pair.fds[1], "its monitor process");
      exchange(monitor, rank, kMs);
    }  // closed, as by the death of its process
    monitor.onReadable(2 * kMs);
    CHECK(monitor.state().phase() == PeerState::Phase::kDead);
    CHECK(monitor.state().deathReason().find("without goodbye") != std::string::npos);
  }
}

TEST_CASE("a stream link: an end that cannot prove the job token is refused", "[liveness-stream]") {
  Pair pair;
  StreamLink monitor(policyOf("tok", 100), true, pair.fds[0], "rank 3");
  StreamLink rank(policyOf("other", 200), false, pair.fds[1], "its monitor process");
  exchange(monitor, rank, kMs);
  CHECK(monitor.state().phase() == PeerState::Phase::kDead);
  CHECK(monitor.state().deathReason().find("could not prove our job token") != std::string::npos);
  CHECK_FALSE(rank.state().authenticated());
}
