// The liveness decisions of the net plugin, driven as the watchdog thread
// drives them (a busy mark per connection with requests outstanding, then the
// link's tick) but without sockets, threads or sleeps: a fake clock moves in
// watchdog ticks and the test plays the peer's frames.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin/net/liveness/peer_link.h"
#include "plugin/net/liveness/peer_state.h"
#include "tests/support/fake_clock.h"
#include "tests/unit/net/watchdog_harness.h"

using namespace resilient;
using namespace resilient::net;
using namespace resilient::net::liveness;
using resilient::test::FakeClock;
using resilient::test::RecordingSink;
using resilient::test::TestConnection;

namespace {

constexpr uint64_t kMs = 1000000;
constexpr int64_t kTimeoutMs = 1000;
constexpr uint64_t kTickMs = 10;  // the watchdog ticks every timeout / 20, 5 to 50 ms
const char* const kToken = "job-7011";

SocketAddress ipv4(const char* host, uint16_t port) {
  SocketAddress a;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  in->sin_family = AF_INET;
  in->sin_port = htons(port);
  inet_pton(AF_INET, host, &in->sin_addr);
  a.length = sizeof(sockaddr_in);
  return a;
}

// The handshake of an opener and an acceptor: both authenticated.
void handshake(PeerState& opener, PeerState& acceptor, uint64_t now) {
  const auto challenge = acceptor.received(opener.openingHello(), now);
  REQUIRE(challenge.reply);
  REQUIRE(challenge.reply->type == Type::kChallenge);
  const auto proof = opener.received(*challenge.reply, now);
  REQUIRE_FALSE(proof.death);
  REQUIRE(proof.reply);
  REQUIRE(proof.reply->type == Type::kProof);
  const auto done = acceptor.received(*proof.reply, now);
  REQUIRE_FALSE(done.death);
  REQUIRE_FALSE(done.reply);
  REQUIRE(opener.authenticated());
  REQUIRE(acceptor.authenticated());
}

// One peer process behind one outgoing link, its handshake done, and the
// watchdog's view of the connections: what Watchdog::tick and Channel::tick
// do for a link, minus the sockets.
struct Peer {
  explicit Peer(const FakeClock& clock, const char* address = "10.1.2.3", uint32_t pid = 4242,
                const char* host = "nodeB")
      : sink(&clock),
        link(Policy{kTimeoutMs, kToken, 1000, "nodeA"}, PeerLink::Origin::kOutgoing,
             ipv4(address, 40000)) {
    link.state.setPid(pid);
    link.state.opened(clock.monoNs());
    PeerState remote(Policy{kTimeoutMs, kToken, pid, host}, false, "10.0.0.1:1");
    handshake(link.state, remote, clock.monoNs());
  }

  // One watchdog tick at `now`. Returns the ping sent, if any. `local`: the
  // local interface of the link, as net::linkStateOf would find it.
  std::optional<Frame> tick(uint64_t now,
                            const std::optional<net::LinkState>& local = std::nullopt) {
    for (ConnectionRecord* conn : connections) {
      if (conn->fault() != nullptr || conn->outstanding() == 0) {
        continue;
      }
      if (const auto death = deathOf(*conn)) {
        sink.report(*conn, *death);
        continue;
      }
      markBusy(*conn);
    }
    const bool busy = link.busy;
    link.busy = false;
    const PeerState::Tick t = link.state.tick(now, busy);
    if (t.silentNs) {
      failBusy(connections, link, link.state.silenceFault(*t.silentNs, local), sink);
    }
    return t.ping;
  }

  void attach(TestConnection& conn) {
    conn->link.store(&link);
    ++link.connections;
    connections.insert(conn.get());
  }

  RecordingSink sink;
  PeerLink link;
  std::set<ConnectionRecord*> connections;
};

// Ticks every kTickMs for `ms`; the peer answers every ping at once when
// `answer`. Returns the offsets (ms from the start) of the pings sent.
std::vector<uint64_t> run(FakeClock& clock, Peer& peer, uint64_t ms, bool answer,
                          const std::optional<net::LinkState>& local = std::nullopt) {
  std::vector<uint64_t> pings;
  const uint64_t start = clock.monoNs();
  for (uint64_t t = 0; t < ms; t += kTickMs) {
    if (const auto ping = peer.tick(clock.monoNs(), local)) {
      pings.push_back((clock.monoNs() - start) / kMs);
      if (answer) {
        const auto r =
            peer.link.state.received(makeFrame(Type::kPong, ping->value), clock.monoNs());
        CHECK_FALSE(r.reply);
        CHECK_FALSE(r.death);
      }
    }
    clock.advanceMs(kTickMs);
  }
  return pings;
}

// A peer with one connection, a request outstanding on it.
struct OneBusy {
  OneBusy() {
    peer.attach(conn);
    conn.post();
  }
  FakeClock clock;
  Peer peer{clock};
  TestConnection conn{"10.1.2.3:5000"};
};

// A peer with two connections, one with a request outstanding, one idle; the
// clock between two ticks after a busy one.
struct BusyAndIdle {
  BusyAndIdle() {
    peer.attach(busy);
    peer.attach(idle);
    busy.post();
    peer.tick(clock.monoNs());
    clock.advanceMs(3);
  }
  FakeClock clock;
  Peer peer{clock};
  TestConnection busy{"10.1.2.3:5000"};
  TestConnection idle{"10.1.2.3:5001"};
};

}  // namespace

TEST_CASE("liveness: pings go out only while requests are outstanding, every quarter timeout",
          "[net][liveness]") {
  CHECK(Policy{1500, "", 0, ""}.pingIntervalNs() == 375 * kMs);
  CHECK(Policy{2, "", 0, ""}.pingIntervalNs() == 1 * kMs);  // at least 1 ms

  FakeClock clock;
  Peer peer(clock);
  TestConnection conn("10.1.2.3:5000");
  peer.attach(conn);

  // Idle: no ping, however long; silence is no fault.
  CHECK(run(clock, peer, 5000, false).empty());

  // Busy: a ping at once, then every 250 ms; the peer answers, so no fault.
  conn.post();
  CHECK(run(clock, peer, 1000, true) == std::vector<uint64_t>{0, 250, 500, 750});
  CHECK(run(clock, peer, 10000, true).size() == 40);
  CHECK(peer.sink.reports.empty());

  // Idle again: the pings stop.
  conn.complete();
  CHECK(run(clock, peer, 5000, false).empty());

  // Busy again: a ping at once, with the next sequence number.
  conn.post();
  const auto ping = peer.tick(clock.monoNs());
  REQUIRE(ping);
  CHECK(ping->type == Type::kPing);
  CHECK(ping->value == 45);
  CHECK(peer.sink.reports.empty());
}

TEST_CASE("liveness: silence past the timeout with requests outstanding is 'peer unresponsive'",
          "[net][liveness]") {
  FakeClock clock;
  Peer peer(clock, "10.1.2.3", 4242, "nodeB");
  TestConnection busy("10.1.2.3:5000");
  TestConnection idle("10.1.2.3:5001");
  peer.attach(busy);
  peer.attach(idle);
  Peer other(clock, "10.9.9.9", 99, "nodeC");  // another peer process, answering
  TestConnection elsewhere("10.9.9.9:5000");
  other.attach(elsewhere);

  busy.post();
  elsewhere.post();
  const uint64_t busySince = clock.monoNs();
  // Up to the timeout itself: pings, no fault.
  while (clock.monoNs() <= busySince + kTimeoutMs * kMs) {
    peer.tick(clock.monoNs());
    if (const auto ping = other.tick(clock.monoNs())) {
      other.link.state.received(makeFrame(Type::kPong, ping->value), clock.monoNs());
    }
    clock.advanceMs(kTickMs);
  }
  CHECK(peer.sink.reports.empty());
  // The first tick past it.
  peer.tick(clock.monoNs());
  other.tick(clock.monoNs());
  REQUIRE(peer.sink.reports.size() == 1);
  const auto& r = peer.sink.reports[0];
  CHECK(r.conn == busy.get());  // not the idle connection to the same peer
  CHECK(r.fault.cls == FaultClass::kPeerUnresponsive);
  CHECK(r.fault.detail ==
        "no answer to heartbeats and no data from it for 1010 ms (threshold 1000 ms): the peer "
        "process or its host is gone, frozen or unreachable");
  CHECK(r.peer == "10.1.2.3:5000 (host nodeB, pid 4242)");  // what Core's WARN names
  CHECK(r.atNs == busySince + 1010 * kMs);
  CHECK(other.sink.reports.empty());
  CHECK(busy->fault() != nullptr);
  CHECK(idle->fault() == nullptr);
  CHECK(elsewhere->fault() == nullptr);

  // Once failed, a connection is not reported again, and with no busy
  // connection left the link is idle. The other connection, busy later on the
  // silent link, gets its own timeout from then.
  clock.advanceMs(kTickMs);
  peer.tick(clock.monoNs());
  CHECK(peer.sink.reports.size() == 1);
  idle.post();
  run(clock, peer, kTimeoutMs + kTickMs, false);
  CHECK(peer.sink.reports.size() == 1);
  peer.tick(clock.monoNs());
  REQUIRE(peer.sink.reports.size() == 2);
  CHECK(peer.sink.reports[1].conn == idle.get());
  CHECK(peer.sink.reports[1].fault.detail.find(
            "no answer to heartbeats and no data from it for 1010 ms") == 0);
  CHECK(peer.sink.reports[1].peer == "10.1.2.3:5001 (host nodeB, pid 4242)");
}

TEST_CASE("liveness: a peer named before its hello is described by what is known",
          "[net][liveness]") {
  PeerLink link(Policy{kTimeoutMs, "", 0, ""}, PeerLink::Origin::kOutgoing, ipv4("10.1.2.3", 40000));
  link.state.setPid(77);
  TestConnection conn;
  conn->link.store(&link);
  CHECK(describePeer(*conn) == "liveness 10.1.2.3:40000 (host ?, pid 77)");
  TestConnection unlinked("10.1.2.3:5000");
  CHECK(describePeer(*unlinked) == "10.1.2.3:5000");
}

TEST_CASE("liveness: data from the peer is evidence of life, as good as a pong",
          "[net][liveness]") {
  // Issue 18 finding 3: under CPU oversubscription, 5 of 7 'peer unresponsive'
  // warnings named a peer whose data had arrived "0 ms since last progress":
  // its watchdog thread, starved, answered late, and the verdict ignored the
  // data. The watchdog calls heardFrom() when a receive connection of the
  // link progressed.
  OneBusy busy;
  FakeClock& clock = busy.clock;
  Peer& peer = busy.peer;
  TestConnection& conn = busy.conn;
  for (uint64_t t = 0; t < 3 * static_cast<uint64_t>(kTimeoutMs); t += kTickMs) {
    heardFrom(*conn, clock.monoNs());  // no pong, but data keeps arriving
    peer.tick(clock.monoNs());
    clock.advanceMs(kTickMs);
  }
  CHECK(peer.sink.reports.empty());
  // The data stops: silence counts from the last of it (one tick ago).
  const uint64_t lastData = clock.monoNs() - kTickMs * kMs;
  while (peer.sink.reports.empty() && clock.monoNs() < lastData + 3 * kTimeoutMs * kMs) {
    peer.tick(clock.monoNs());
    clock.advanceMs(kTickMs);
  }
  REQUIRE(peer.sink.reports.size() == 1);
  CHECK(peer.sink.reports[0].fault.cls == FaultClass::kPeerUnresponsive);
  CHECK(peer.sink.reports[0].atNs - lastData <= (kTimeoutMs + 2 * kTickMs) * kMs);
  CHECK(peer.sink.reports[0].atNs - lastData > kTimeoutMs * kMs);
}

TEST_CASE("liveness: silence without outstanding requests is no fault", "[net][liveness]") {
  FakeClock clock;
  Peer peer(clock);
  TestConnection conn("10.1.2.3:5000");
  peer.attach(conn);
  CHECK(run(clock, peer, 60000, false).empty());
  CHECK(peer.sink.reports.empty());

  // Busy after a long silence: the silence counts from the first busy tick,
  // not from the last frame heard a minute ago.
  conn.post();
  run(clock, peer, kTimeoutMs + kTickMs, false);
  CHECK(peer.sink.reports.empty());
  peer.tick(clock.monoNs());
  REQUIRE(peer.sink.reports.size() == 1);
  CHECK(peer.sink.reports[0].fault.cls == FaultClass::kPeerUnresponsive);
  CHECK(peer.sink.reports[0].fault.detail.find(
            "no answer to heartbeats and no data from it for 1010 ms") == 0);
}

TEST_CASE("liveness: a goodbye is no fault while no request is outstanding", "[net][liveness]") {
  FakeClock clock;
  Peer peer(clock);
  TestConnection conn("10.1.2.3:5000");
  peer.attach(conn);

  const auto r = peer.link.state.received(makeGoodbye(), clock.monoNs());
  CHECK_FALSE(r.reply);
  CHECK_FALSE(r.death);
  CHECK(peer.link.state.phase() == PeerState::Phase::kClosed);
  CHECK(peer.link.state.closedByPeer());
  // The end of stream that follows is orderly.
  CHECK_FALSE(peer.link.state.endOfStream(0));
  peer.link.state.closed();
  CHECK(peer.link.state.phase() == PeerState::Phase::kClosed);
  // Idle: no pings to a closed link, and no fault however long.
  CHECK(run(clock, peer, 10 * kTimeoutMs, false).empty());
  CHECK(peer.sink.reports.empty());
  CHECK(conn->fault() == nullptr);

  // A link we closed ourselves fails nothing either.
  PeerState ours(Policy{kTimeoutMs, "", 0, ""}, false, "10.1.2.3:40000");
  ours.closed();
  CHECK_FALSE(ours.closedByPeer());
}

TEST_CASE("liveness: a goodbye with requests outstanding is 'peer closed', at once",
          "[net][liveness]") {
  // Issue 18 finding 2: a survivor whose inner transport never reports the
  // closed peer (aws-ofi-nccl over libfabric's RDM endpoint) waited for the
  // progress timeout (300 s) after its peer said goodbye.
  BusyAndIdle f;
  FakeClock& clock = f.clock;
  Peer& peer = f.peer;
  TestConnection& busy = f.busy;
  TestConnection& idle = f.idle;

  peer.link.state.received(makeGoodbye(), clock.monoNs());
  // What the channel does on the goodbye: the busy connections fail now.
  failBusy(peer.connections, peer.link, peer.link.state.closedFault(), peer.sink);
  REQUIRE(peer.sink.reports.size() == 1);
  CHECK(peer.sink.reports[0].conn == busy.get());
  CHECK(peer.sink.reports[0].fault.cls == FaultClass::kPeerClosed);
  CHECK(peer.sink.reports[0].fault.detail ==
        "the peer process closed its side (goodbye) with requests to it outstanding");
  CHECK_FALSE(peer.sink.reports[0].fault.root);  // the peer itself is the culprit
  CHECK(peer.sink.reports[0].atNs == clock.monoNs());
  CHECK(isRemote(FaultClass::kPeerClosed));

  // The idle connection fails at the first tick it is busy, not at a timeout.
  idle.post();
  CHECK_FALSE(peer.tick(clock.monoNs()));
  REQUIRE(peer.sink.reports.size() == 2);
  CHECK(peer.sink.reports[1].conn == idle.get());
  CHECK(peer.sink.reports[1].fault.cls == FaultClass::kPeerClosed);
}

TEST_CASE("liveness: a goodbye that names a fault makes it the root cause", "[net][liveness]") {
  // Issue 18 finding 2: the survivors of a cascade blamed their neighbour.
  OneBusy busy;
  FakeClock& clock = busy.clock;
  Peer& peer = busy.peer;
  peer.tick(clock.monoNs());

  const uint64_t exited = static_cast<uint64_t>(FaultClass::kPeerExited) + 1;
  peer.link.state.received(makeGoodbye(exited, 777, "nodeC", "no goodbye (process exited)"),
                           clock.monoNs());
  clock.advanceMs(kTickMs);
  peer.tick(clock.monoNs());
  REQUIRE(peer.sink.reports.size() == 1);
  const Fault& f = peer.sink.reports[0].fault;
  CHECK(f.cls == FaultClass::kPeerClosed);
  CHECK(f.detail ==
        "the peer process closed its side after detecting peer process exited of pid 777 on "
        "nodeC (no goodbye (process exited))");
  REQUIRE(f.root);
  CHECK(f.root->cls == FaultClass::kPeerExited);
  CHECK(f.root->pid == 777);
  CHECK(f.root->host == "nodeC");
  CHECK(peer.sink.reports[0].peer == "10.1.2.3:5000 (host nodeB, pid 4242)");
}

TEST_CASE("liveness: an end of stream without goodbye is 'peer process exited', at once",
          "[net][liveness]") {
  BusyAndIdle f;
  FakeClock& clock = f.clock;
  Peer& peer = f.peer;
  TestConnection& busy = f.busy;
  TestConnection& idle = f.idle;

  // What the channel does when recv returns 0: no tick, no timeout.
  const auto reason = peer.link.state.endOfStream(0);
  REQUIRE(reason);
  CHECK(*reason == "the peer process closed its liveness channel without goodbye (process exited)");
  REQUIRE(peer.link.state.die(*reason));
  CHECK_FALSE(peer.link.state.die("again"));  // dies once
  failBusy(peer.connections, peer.link, peer.link.state.deathFault(), peer.sink);
  REQUIRE(peer.sink.reports.size() == 1);
  CHECK(peer.sink.reports[0].conn == busy.get());
  CHECK(peer.sink.reports[0].fault.cls == FaultClass::kPeerExited);
  CHECK(peer.sink.reports[0].fault.detail == *reason);
  CHECK(peer.sink.reports[0].peer == "10.1.2.3:5000 (host nodeB, pid 4242)");
  CHECK(peer.sink.reports[0].atNs == clock.monoNs());
  CHECK(peer.link.state.phase() == PeerState::Phase::kDead);
  peer.link.state.closed();  // closing a dead link keeps it dead
  CHECK(peer.link.state.phase() == PeerState::Phase::kDead);

  // The idle connection fails at the first tick it is busy.
  idle.post();
  CHECK_FALSE(peer.tick(clock.monoNs()));  // and a dead link is not pinged
  REQUIRE(peer.sink.reports.size() == 2);
  CHECK(peer.sink.reports[1].conn == idle.get());
  CHECK(peer.sink.reports[1].fault.cls == FaultClass::kPeerExited);

  // A failed read or connect is a death too.
  PeerState reset(Policy{kTimeoutMs, "", 0, ""}, false, "10.1.2.3:40000");
  const auto resetReason = reset.endOfStream(ECONNRESET);
  REQUIRE(resetReason);
  CHECK(resetReason->find("liveness channel: ") == 0);
  PeerState refused(Policy{kTimeoutMs, "", 0, ""}, true, "10.1.2.3:40000");
  const auto refusedReason = refused.connectFinished(ECONNREFUSED, clock.monoNs());
  REQUIRE(refusedReason);
  CHECK(refusedReason->find("liveness channel to 10.1.2.3:40000: connect: ") == 0);
  CHECK(refusedReason->find("(the peer process is gone)") != std::string::npos);
  PeerState connected(Policy{kTimeoutMs, "", 0, ""}, true, "10.1.2.3:40000");
  CHECK_FALSE(connected.connectFinished(0, clock.monoNs()));
  CHECK(connected.phase() == PeerState::Phase::kUp);
}

TEST_CASE("liveness: silence while the local interface is down or without carrier is 'link down'",
          "[net][liveness]") {
  OneBusy busy;
  FakeClock& clock = busy.clock;
  Peer& peer = busy.peer;
  const net::LinkState down{"eth1", false, false};
  run(clock, peer, kTimeoutMs + kTickMs, false, down);
  CHECK(peer.sink.reports.empty());
  peer.tick(clock.monoNs(), down);
  REQUIRE(peer.sink.reports.size() == 1);
  CHECK(peer.sink.reports[0].fault.cls == FaultClass::kLinkDown);
  CHECK(peer.sink.reports[0].fault.detail ==
        "no answer to heartbeats and no data for 1010 ms (threshold 1000 ms) and the local interface eth1 "
        "is down: the link to the peer is cut");

  const PeerState& state = peer.link.state;
  const Fault noCarrier = state.silenceFault(1500 * kMs, net::LinkState{"eth1", true, false});
  CHECK(noCarrier.cls == FaultClass::kLinkDown);
  CHECK(noCarrier.detail.find("the local interface eth1 is without carrier") != std::string::npos);
  // An interface that is up, or none known, says nothing: the peer is unresponsive.
  CHECK(state.silenceFault(1500 * kMs, net::LinkState{"eth1", true, true}).cls ==
        FaultClass::kPeerUnresponsive);
  CHECK(state.silenceFault(1500 * kMs, std::nullopt).cls == FaultClass::kPeerUnresponsive);
}

TEST_CASE("liveness: the handshake proves the job token both ways, and nothing else counts before it",
          "[net][liveness]") {
  FakeClock clock;
  const uint64_t now = clock.monoNs();
  // Same token: both authenticated, each knows the other's pid and host.
  PeerState opener(Policy{kTimeoutMs, kToken, 5, "nodeA"}, true, "10.1.2.3:40000");
  PeerState acceptor(Policy{kTimeoutMs, kToken, 6, "nodeB"}, false, "10.1.2.4:50000");
  CHECK_FALSE(acceptor.helloSeen());
  handshake(opener, acceptor, now);
  CHECK(opener.host() == "nodeB");
  CHECK(opener.pid() == 6);
  CHECK(acceptor.host() == "nodeA");
  CHECK(acceptor.pid() == 5);
  // A ping is answered with a pong of the same sequence number.
  const auto ping = acceptor.received(makeFrame(Type::kPing, 31), now);
  REQUIRE(ping.reply);
  CHECK(ping.reply->type == Type::kPong);
  CHECK(ping.reply->value == 31);
  // The peer refused our proof: the link dies.
  const auto refused = opener.received(makeFrame(Type::kRefused), now);
  REQUIRE(refused.death);
  CHECK(refused.death->find("peer 10.1.2.3:40000 refused our proof of the job token") == 0);
}

TEST_CASE("liveness: another token fails the handshake on both sides, with the reason",
          "[net][liveness]") {
  // Issue 18 finding 5: the hello carried the token's digest, which any
  // client of the port received and replayed. Now each side proves the
  // token over fresh nonces; the wrong one is refused, by either side.
  FakeClock clock;
  const uint64_t now = clock.monoNs();
  PeerState opener(Policy{kTimeoutMs, "job-A", 5, "nodeA"}, true, "10.1.2.3:40000");
  PeerState acceptor(Policy{kTimeoutMs, "job-B", 6, "nodeB"}, false, "10.1.2.4:50000");
  const auto challenge = acceptor.received(opener.openingHello(), now);
  REQUIRE(challenge.reply);
  // The opener checks the acceptor's proof first: it fails, refused.
  const auto verdict = opener.received(*challenge.reply, now);
  REQUIRE(verdict.reply);
  CHECK(verdict.reply->type == Type::kRefused);
  REQUIRE(verdict.death);
  CHECK(*verdict.death ==
        "peer 10.1.2.3:40000 (pid 6, host nodeB) could not prove our job token (another job's "
        "process, or another NCCL_RESILIENT_JOB_TOKEN): refused");
  CHECK_FALSE(opener.authenticated());
  const auto told = acceptor.received(*verdict.reply, now);
  REQUIRE(told.death);
  CHECK(told.death->find("refused our proof of the job token") != std::string::npos);

  // An opener that answers a good challenge with a proof made without the
  // token (or replayed from another handshake) is refused by the acceptor.
  PeerState honest(Policy{kTimeoutMs, "job-A", 5, "nodeA"}, true, "10.1.2.3:40000");
  PeerState other(Policy{kTimeoutMs, "job-A", 6, "nodeB"}, false, "10.1.2.4:50000");
  const auto c1 = other.received(honest.openingHello(), now);
  const auto p1 = honest.received(*c1.reply, now);
  REQUIRE(p1.reply);
  PeerState fresh(Policy{kTimeoutMs, "job-A", 6, "nodeB"}, false, "10.1.2.4:50000");
  Frame replayedHello = makeHello(auth::Nonce{}, 5, "nodeA");
  (void)fresh.received(replayedHello, now);
  const auto replay = fresh.received(*p1.reply, now);
  REQUIRE(replay.death);
  CHECK(replay.reply->type == Type::kRefused);
  CHECK(replay.death->find("(pid 5, host nodeA) could not prove our job token") !=
        std::string::npos);
  CHECK_FALSE(fresh.authenticated());

  // The empty token is a token: an acceptor without one refuses an opener with one.
  PeerState withToken(Policy{kTimeoutMs, "job-A", 5, "nodeA"}, true, "10.1.2.3:40000");
  PeerState without(Policy{kTimeoutMs, "", 6, "nodeB"}, false, "10.1.2.4:50000");
  const auto c2 = without.received(withToken.openingHello(), now);
  CHECK(withToken.received(*c2.reply, now).death);
}

TEST_CASE("liveness: frames before the handshake kill the link", "[net][liveness]") {
  FakeClock clock;
  const uint64_t now = clock.monoNs();
  for (const Type type : {Type::kBind, Type::kPing, Type::kPong, Type::kGoodbye}) {
    PeerState acceptor(Policy{kTimeoutMs, kToken, 6, "nodeB"}, false, "10.1.2.4:50000");
    (void)acceptor.received(makeHello(auth::freshNonce(), 5, "nodeA"), now);
    const auto r = acceptor.received(makeFrame(type, 7), now);
    REQUIRE(r.death);
    CHECK(r.death->find("before authenticating") != std::string::npos);
    CHECK_FALSE(r.reply);  // no pong to a stranger
  }
  // A fault notice from a stranger is not believed either.
  PeerState acceptor(Policy{kTimeoutMs, kToken, 6, "nodeB"}, false, "10.1.2.4:50000");
  const auto notice = acceptor.received(makeFaultNotice(1, 9, "x", "y", 3), now);
  CHECK(notice.death);
  CHECK_FALSE(acceptor.peerReason());
  // A second hello, or a challenge to an acceptor, breaks the handshake.
  PeerState twice(Policy{kTimeoutMs, kToken, 6, "nodeB"}, false, "10.1.2.4:50000");
  (void)twice.received(makeHello(auth::freshNonce(), 5, "nodeA"), now);
  CHECK(twice.received(makeHello(auth::freshNonce(), 5, "nodeA"), now).death);
  PeerState wrongWay(Policy{kTimeoutMs, kToken, 6, "nodeB"}, false, "10.1.2.4:50000");
  CHECK(wrongWay.received(makeChallenge(auth::freshNonce(), 5, "a", auth::Proof{}), now).death);
}
