// The TCP store beyond the conformance suite: handshake and token, malformed
// and oversized input, server-side waits (no polling), connection retries,
// a killed or restarted server, and a client killed in a barrier.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <map>
#include <thread>

#include <catch2/catch.hpp>

#include "common/net/socket.h"
#include "store/errors.h"
#include "store/tcp/client.h"
#include "store/tcp/frame_decoder.h"
#include "store/tcp/protocol.h"
#include "store/tcp/server.h"
#include "tests/support/loopback_socket.h"
#include "tests/unit/store/store_test_util.h"

using namespace resilient::store;
using namespace resilient::store::tcp;
using resilient::FileDescriptor;
using resilient::test::ChildProcess;
using resilient::test::Expectations;
using resilient::test::runThreads;
using resilient::test::testClientOptions;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

ServerOptions localServer(const std::string& token = "tok") {
  ServerOptions o;
  o.host = "127.0.0.1";
  o.token = token;
  return o;
}

std::unique_ptr<TcpStoreClient> connectTo(uint16_t port, const std::string& token = "tok") {
  ClientOptions o = testClientOptions();
  o.token = token;
  return std::make_unique<TcpStoreClient>("127.0.0.1", port, o);
}

FileDescriptor rawConnect(uint16_t port) {
  FileDescriptor fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

void rawSend(const FileDescriptor& fd, std::string_view bytes) {
  REQUIRE(::send(fd.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(bytes.size()));
}

// Reads until the peer closes; returns what arrived, or nullopt if it did
// not close within `timeout`.
std::optional<std::string> readUntilClosed(const FileDescriptor& fd, milliseconds timeout) {
  std::string got;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd.get(), POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
      return std::nullopt;
    }
    char buf[4096];
    const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n <= 0) {
      return got;
    }
    got.append(buf, static_cast<size_t>(n));
  }
}

std::string helloBytes(const std::string& token, uint16_t version = kVersion) {
  std::string out;
  encodeHello(Hello{version, token, "raw test client"}, &out);
  return out;
}

}  // namespace

TEST_CASE("tcp: a wrong job token is refused; the server serves the others", "[store][tcp]") {
  StoreServer server(localServer("right"));
  auto good = connectTo(server.port(), "right");
  good->set("k", "v");
  try {
    connectTo(server.port(), "wrong");
    FAIL("connected with a wrong token");
  } catch (const AuthRefused& e) {
    CHECK(e.code() == StoreErrc::kAuthRefused);
    CHECK(std::string(e.what()).find("token") != std::string::npos);
  }
  CHECK_THROWS_AS(connectTo(server.port(), ""), AuthRefused);
  CHECK(server.stats().refusedToken == 2);
  CHECK(good->get("k") == std::optional<std::string>("v"));
  // A server without a token accepts any.
  StoreServer open(localServer(""));
  CHECK_NOTHROW(connectTo(open.port(), "anything")->ping());
}

TEST_CASE("tcp: malformed, oversized and silent peers are dropped; the server carries on",
          "[store][tcp]") {
  ServerOptions o = localServer();
  o.maxFrameBytes = size_t{64} * 1024;
  o.handshakeTimeout = milliseconds(300);
  StoreServer server(o);
  auto client = connectTo(server.port());
  client->set("before", "1");
  uint64_t refused = 0;

  SECTION("garbage instead of a hello") {
    FileDescriptor fd = rawConnect(server.port());
    rawSend(fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    auto got = readUntilClosed(fd, milliseconds(5000));
    REQUIRE(got.has_value());
    CHECK(got->empty());  // nothing answered to a stranger
    refused = 1;
  }
  SECTION("a hello of another protocol version") {
    FileDescriptor fd = rawConnect(server.port());
    rawSend(fd, helloBytes("tok", kVersion + 1));
    auto got = readUntilClosed(fd, milliseconds(5000));
    REQUIRE(got.has_value());
    REQUIRE(got->size() == kHelloReplyBytes);
    CHECK(decodeHelloReply(*got)->status == HelloStatus::kVersionUnsupported);
    refused = 1;
  }
  SECTION("a frame over the limit, announced in its header") {
    FileDescriptor fd = rawConnect(server.port());
    rawSend(fd, helloBytes("tok"));
    std::string frame;
    encodeFrameHeader(FrameHeader{1u << 30, static_cast<uint8_t>(Op::kSet), 1}, &frame);
    rawSend(fd, frame);
    auto got = readUntilClosed(fd, milliseconds(5000));
    REQUIRE(got.has_value());
    CHECK(got->size() == kHelloReplyBytes);  // the hello reply, then the door
    refused = 1;
  }
  SECTION("a malformed payload after a good request") {
    FileDescriptor fd = rawConnect(server.port());
    std::string bytes = helloBytes("tok");
    StoreRequest ping;
    ping.op = Op::kPing;
    ping.id = 5;
    encodeRequest(ping, &bytes);
    encodeFrameHeader(FrameHeader{3, static_cast<uint8_t>(Op::kGet), 6}, &bytes);
    bytes += "abc";  // a key length cut short
    rawSend(fd, bytes);
    auto got = readUntilClosed(fd, milliseconds(5000));
    REQUIRE(got.has_value());
    CHECK(got->size() == kHelloReplyBytes + kFrameHeaderBytes + 1);  // hello reply + ping reply
    refused = 1;
  }
  SECTION("an unknown opcode") {
    FileDescriptor fd = rawConnect(server.port());
    std::string bytes = helloBytes("tok");
    encodeFrameHeader(FrameHeader{0, 0x7f, 1}, &bytes);
    rawSend(fd, bytes);
    REQUIRE(readUntilClosed(fd, milliseconds(5000)).has_value());
    refused = 1;
  }
  SECTION("a client that never says hello") {
    FileDescriptor fd = rawConnect(server.port());
    rawSend(fd, helloBytes("tok").substr(0, 5));  // a correct start, then silence
    auto got = readUntilClosed(fd, milliseconds(10000));
    REQUIRE(got.has_value());  // dropped at the handshake timeout
    refused = 1;
  }
  SECTION("a client that vanishes mid-frame") {
    {
      FileDescriptor fd = rawConnect(server.port());
      std::string bytes = helloBytes("tok");
      StoreRequest set;
      set.op = Op::kSet;
      set.key = "half";
      set.value = std::string(1000, 'x');
      encodeRequest(set, &bytes);
      rawSend(fd, std::string_view(bytes).substr(0, bytes.size() - 10));
    }
    refused = 0;
  }
  // The server still serves, and never applied a half frame.
  CHECK(client->get("before") == std::optional<std::string>("1"));
  CHECK_FALSE(client->exists("half"));
  auto fresh = connectTo(server.port());
  fresh->set("after", "1");
  CHECK(client->get("after") == std::optional<std::string>("1"));
  CHECK(server.stats().refusedProtocol == refused);
}

TEST_CASE("tcp: a request over the server's frame limit is refused before sending",
          "[store][tcp]") {
  ServerOptions o = localServer();
  o.maxFrameBytes = 4096;
  StoreServer server(o);
  auto client = connectTo(server.port());
  CHECK_THROWS_AS(client->set("k", std::string(8192, 'v')), InvalidArgument);
  client->set("k", "small");
  CHECK(client->get("k") == std::optional<std::string>("small"));
  // A reply that would be too large is answered with an error, not a cut.
  std::vector<KeyValue> pairs;
  pairs.reserve(4);
  for (int i = 0; i < 4; ++i) {
    pairs.emplace_back("v" + std::to_string(i), std::string(1500, 'x'));
  }
  for (const auto& p : pairs) {
    client->set(p.first, p.second);
  }
  CHECK_THROWS_AS(client->multiGet({"v0", "v1", "v2", "v3"}), InvalidArgument);
  CHECK(client->get("v0") == std::optional<std::string>(std::string(1500, 'x')));
}

TEST_CASE("tcp: a wait costs one request, the server answers it", "[store][tcp]") {
  StoreServer server(localServer());
  auto client = connectTo(server.port());
  client->ping();
  const uint64_t before = server.stats().requests;
  CHECK_THROWS_AS(client->wait({"never"}, milliseconds(1200)), TimeoutError);
  const uint64_t during = server.stats().requests - before;
  CHECK(during == 1);  // no polling
  // And a barrier: one request per arriving rank.
  auto other = connectTo(server.port());
  const uint64_t b0 = server.stats().requests;
  std::thread t([&] { other->barrier({"b", 0, 1, 2, true}, milliseconds(10000)); });
  client->barrier({"b", 0, 0, 2, true}, milliseconds(10000));
  t.join();
  CHECK(server.stats().requests - b0 == 2);
}

TEST_CASE("tcp: clients may start before the server; they retry until it listens", "[store][tcp]") {
  // Reserve a port: bound but not listening, so connections are refused.
  resilient::test::LoopbackSocket reserved = resilient::test::bindLoopback(false);
  const uint16_t port = reserved.port;
  std::atomic<bool> connected{false};
  std::unique_ptr<TcpStoreClient> early;
  std::thread t([&] {
    early = connectTo(port);
    connected = true;
  });
  REQUIRE(::listen(reserved.fd.get(), 128) == 0);
  ServerOptions o = localServer();
  o.adoptListenFd = reserved.fd.release();
  StoreServer server(o);
  t.join();
  CHECK(connected);
  early->set("k", "v");
  CHECK(early->get("k") == std::optional<std::string>("v"));
}

TEST_CASE("tcp: a client gives up connecting at its connect timeout", "[store][tcp]") {
  const resilient::test::LoopbackSocket reserved = resilient::test::bindLoopback(false);
  const uint16_t port = reserved.port;
  ClientOptions o = testClientOptions();
  o.connectTimeout = milliseconds(500);
  const auto start = Clock::now();
  try {
    TcpStoreClient c("127.0.0.1", port, o);
    FAIL("connected to nothing");
  } catch (const ConnectionLost& e) {
    CHECK(std::string(e.what()).find("attempts") != std::string::npos);
  }
  CHECK(Clock::now() - start < milliseconds(5000));
}

TEST_CASE("tcp: the server killed: calls fail with a clear error, none hangs", "[store][tcp]") {
  uint16_t port = 0;
  auto server = resilient::test::spawnStoreServer("tok", &port);
  auto client = connectTo(port);
  auto waiter = connectTo(port);
  client->set("k", "v");
  std::atomic<bool> failed{false};
  std::string waitError;
  const auto start = Clock::now();
  std::thread t([&] {
    try {
      waiter->set("waiting", "1");
      waiter->wait({"never"}, milliseconds(60000));
    } catch (const ConnectionLost& e) {
      waitError = e.what();
      failed = true;
    }
  });
  client->wait({"waiting"}, milliseconds(10000));
  server->kill(SIGKILL);
  REQUIRE(server->wait(milliseconds(10000)) == 128 + SIGKILL);
  t.join();
  CHECK(failed);
  // Well before the wait's own 60 s: the reconnect window is 2 s.
  CHECK(Clock::now() - start < milliseconds(15000));
  CHECK(waitError.find("gone") != std::string::npos);
  const auto t0 = Clock::now();
  CHECK_THROWS_AS(client->get("k", milliseconds(30000)), ConnectionLost);
  CHECK_THROWS_AS(client->add("c", 1, milliseconds(30000)), ConnectionLost);
  CHECK(Clock::now() - t0 < milliseconds(10000));
}

TEST_CASE("tcp: a restarted server is detected: its state is lost", "[store][tcp]") {
  uint16_t port = 0;
  auto first = resilient::test::spawnStoreServer("tok", &port);
  auto client = connectTo(port);
  client->set("k", "v");
  first->kill(SIGKILL);
  REQUIRE(first->wait(milliseconds(10000)) == 128 + SIGKILL);
  ChildProcess second({resilient::test::storeBinary(), "--listen",
                       "127.0.0.1:" + std::to_string(port), "--token", "tok"});
  REQUIRE(second.readLine(milliseconds(10000)).find("serving") != std::string::npos);
  try {
    client->get("k");
    FAIL("a restarted, empty server was trusted");
  } catch (const ConnectionLost& e) {
    CHECK(std::string(e.what()).find("restarted") != std::string::npos);
  }
}

namespace {

// A store server started on `port` (token "tok") `delay` from now, after
// `before`, from a thread that lives as long as this object: the child dies
// with the thread that spawned it (PR_SET_PDEATHSIG), and a thread that ended
// at once killed the new server whenever the child set its death signal
// before the thread was gone (the client then found no server).
class LaterServer {
 public:
  LaterServer(uint16_t port, milliseconds delay, std::function<void()> before = {}) {
    thread_ = std::thread([this, port, delay, before = std::move(before),
                           finished = done_.get_future()] {
      std::this_thread::sleep_for(delay);
      if (before) {
        before();
      }
      server_ = std::make_unique<ChildProcess>(std::vector<std::string>{
          resilient::test::storeBinary(), "--listen", "127.0.0.1:" + std::to_string(port),
          "--token", "tok"});
      finished.wait();
    });
  }
  ~LaterServer() {
    done_.set_value();
    thread_.join();
  }
  LaterServer(const LaterServer&) = delete;
  LaterServer& operator=(const LaterServer&) = delete;

 private:
  std::promise<void> done_;
  std::unique_ptr<ChildProcess> server_;
  std::thread thread_;
};

// A client's options that follow a server restarted on the same port.
ClientOptions followingOptions() {
  ClientOptions o = testClientOptions();
  o.token = "tok";
  o.followRestarts = true;
  o.reconnectTimeout = milliseconds(20000);  // the new server's start, on a loaded machine
  return o;
}

}  // namespace

TEST_CASE("tcp: a client that follows restarts goes on with the restarted server",
          "[store][tcp]") {
  uint16_t port = 0;
  auto first = resilient::test::spawnStoreServer("tok", &port);
  ClientOptions o = followingOptions();
  std::atomic<int> restarts{0};
  o.onServerRestart = [&] { ++restarts; };
  TcpStoreClient client("127.0.0.1", port, o);
  client.set("k", "v");
  first->kill(SIGKILL);
  REQUIRE(first->wait(milliseconds(10000)) == 128 + SIGKILL);
  // The new server comes up while the client retries (its port refuses in
  // between): the call goes through to it.
  const LaterServer second(port, milliseconds(200));
  CHECK_FALSE(client.get("k", milliseconds(10000)).has_value());  // the state is gone
  CHECK(restarts == 1);
  client.set("k", "w");
  CHECK(client.get("k") == std::optional<std::string>("w"));
  CHECK(restarts == 1);
}

// The agent drill's store kill while a replacement registered as a joiner
// (add, not idempotent): the process ended with "lost during add ... may or
// may not have been applied". Whatever the request did on a server that
// restarted went with its state: with followRestarts it goes to the new one.
TEST_CASE("tcp: a following client sends a call lost to a server restart to the new server",
          "[store][tcp][restart]") {
  uint16_t port = 0;
  auto first = resilient::test::spawnStoreServer("tok", &port);
  TcpStoreClient client("127.0.0.1", port, followingOptions());
  client.set("k", "v");
  // The request reaches a server that no longer answers (stopped for sure:
  // SIGSTOP takes effect at the target's next return from the kernel), which
  // then dies.
  first->kill(SIGSTOP);
  const auto stopped = [pid = first->pid()] {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'T';
  };
  for (int i = 0; i < 1000 && !stopped(); ++i) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  REQUIRE(stopped());
  const LaterServer second(port, milliseconds(300), [&] {
    first->kill(SIGKILL);
    first->wait(milliseconds(10000));
  });
  CHECK(client.add("joiners", 1, milliseconds(15000)) == 1);
  CHECK(client.compareSet("c", std::nullopt, "x").swapped);
  CHECK_FALSE(client.get("k").has_value());  // the new instance
}

TEST_CASE("tcp: a client killed in a barrier", "[store][tcp][barrier]") {
  StoreServer server(localServer());
  const std::string url = "tcp://127.0.0.1:" + std::to_string(server.port());
  auto monitor = connectTo(server.port());
  auto r0 = connectTo(server.port());
  auto r1 = connectTo(server.port());
  // Rank 2 is another process: `resilient-store client ... barrier`.
  const auto spawnRank2 = [&](const std::string& name) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{resilient::test::storeBinary(), "client", "--store", url,
                                 "--token", "tok", "barrier", name, "0", "2", "3"});
  };

  SECTION("killed after it arrived: it counts, the others are released") {
    auto rank2 = spawnRank2("a");
    // Wait until the server has counted rank 2 (arrived == 2 with rank 0 marked).
    const auto deadline = Clock::now() + milliseconds(10000);
    uint32_t arrived = 0;
    while ((arrived = monitor->barrier({"a", 0, 0, 3, false}).arrived) < 2 &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(10));  // polling another process's progress
    }
    REQUIRE(arrived == 2);
    rank2->kill(SIGKILL);
    REQUIRE(rank2->wait(milliseconds(10000)) == 128 + SIGKILL);
    BarrierResult r = r1->barrier({"a", 0, 1, 3, true}, milliseconds(10000));
    CHECK(r.completed);
    CHECK(r.arrived == 3);
  }
  SECTION("killed before it arrived: the barrier times out naming it") {
    auto rank2 = std::make_unique<ChildProcess>(
        std::vector<std::string>{resilient::test::storeBinary(), "client", "--store", url,
                                 "--token", "tok", "wait", "forever"});
    rank2->kill(SIGKILL);
    REQUIRE(rank2->wait(milliseconds(10000)) == 128 + SIGKILL);
    std::vector<std::string> errors(2);
    std::vector<std::vector<int>> missing(2);
    runThreads(2, [&](int rank) {
      try {
        (rank == 0 ? r0 : r1)->barrier({"b", 0, rank, 3, true}, milliseconds(800));
      } catch (const BarrierTimeout& e) {
        missing[static_cast<size_t>(rank)] = e.missingRanks();
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
    CHECK(missing[0] == std::vector<int>{2});
    CHECK(missing[1] == std::vector<int>{2});
    CHECK(errors[0].find("missing rank 2") != std::string::npos);
    CHECK(errors[1].find("missing rank 2") != std::string::npos);
  }
  SECTION("killed before it arrived: its monitor marks it and the barrier completes") {
    auto rank2 = std::make_unique<ChildProcess>(
        std::vector<std::string>{resilient::test::storeBinary(), "client", "--store", url,
                                 "--token", "tok", "wait", "forever"});
    rank2->kill(SIGKILL);
    REQUIRE(rank2->wait(milliseconds(10000)) == 128 + SIGKILL);
    std::atomic<bool> done0{false};
    std::atomic<bool> done1{false};
    std::thread t0([&] {
      done0 = r0->barrier({"c", 0, 0, 3, true}, milliseconds(20000)).completed;
    });
    std::thread t1([&] {
      done1 = r1->barrier({"c", 0, 1, 3, true}, milliseconds(20000)).completed;
    });
    monitor->barrier({"c", 0, 2, 3, false});
    t0.join();
    t1.join();
    CHECK(done0);
    CHECK(done1);
  }
  // The server is unharmed.
  CHECK_NOTHROW(monitor->ping());
}

TEST_CASE("tcp: 256 clients in one process pass barriers together", "[store][tcp][barrier]") {
  StoreServer server(localServer());
  constexpr int kClients = 256;
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  clients.reserve(kClients);
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(connectTo(server.port()));
  }
  CHECK(server.stats().connectionsOpen == kClients);
  Expectations e;
  runThreads(kClients, [&](int rank) {
    for (uint64_t gen = 0; gen < 3; ++gen) {
      BarrierResult r = clients[static_cast<size_t>(rank)]->barrier(
          {"many", gen, rank, kClients, true}, milliseconds(30000));
      e.expect(r.arrived == static_cast<uint32_t>(kClients),
               "rank " + std::to_string(rank) + ": arrived " + std::to_string(r.arrived));
    }
  });
  CHECK(e.failures().empty());
  clients.clear();
  // Closed connections leave the server's books.
  const auto deadline = Clock::now() + milliseconds(10000);
  while (server.stats().connectionsOpen != 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));  // the server notices closes asynchronously
  }
  CHECK(server.stats().connectionsOpen == 0);
}

TEST_CASE("tcp: ranks sharing connections are all released, each with its own answer",
          "[store][tcp][barrier]") {
  // 64 connections, 6 ranks on each: one release writes several replies to
  // one connection, from a burst large enough for the send pool.
  StoreServer server(localServer());
  constexpr int kClients = 64;
  constexpr int kRanksPerClient = 6;
  constexpr int kRanks = kClients * kRanksPerClient;
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(connectTo(server.port()));
  }
  std::vector<uint32_t> indices(kRanks, 0);
  Expectations e;
  runThreads(kRanks, [&](int rank) {
    BarrierResult r = clients[static_cast<size_t>(rank % kClients)]->barrier(
        {"shared", 0, rank, kRanks, true}, milliseconds(30000));
    e.expect(r.completed && r.arrived == static_cast<uint32_t>(kRanks),
             "rank " + std::to_string(rank) + ": arrived " + std::to_string(r.arrived));
    indices[static_cast<size_t>(rank)] = r.arrivalIndex;
  });
  CHECK(e.failures().empty());
  // Every rank got its own arrival index: 1..kRanks, each once.
  std::sort(indices.begin(), indices.end());
  for (int i = 0; i < kRanks; ++i) {
    CHECK(indices[static_cast<size_t>(i)] == static_cast<uint32_t>(i + 1));
  }
}

namespace {

// Reads reply frames (after the hello reply) until `n` have come or
// `timeout` passed; returns them by request id.
std::map<uint64_t, Response> readReplies(const FileDescriptor& fd, size_t n, milliseconds timeout) {
  std::string in;
  std::map<uint64_t, Response> got;
  FrameDecoder decoder(kDefaultMaxFrameBytes, FrameKind::kReply);
  bool helloRead = false;
  const auto deadline = Clock::now() + timeout;
  while (got.size() < n) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd.get(), POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
      break;
    }
    char buf[4096];
    const ssize_t r = ::recv(fd.get(), buf, sizeof buf, 0);
    if (r <= 0) {
      break;
    }
    in.append(buf, static_cast<size_t>(r));
    if (!helloRead) {
      if (in.size() < kHelloReplyBytes) {
        continue;
      }
      REQUIRE(decodeHelloReply(in.substr(0, kHelloReplyBytes))->status == HelloStatus::kOk);
      in.erase(0, kHelloReplyBytes);
      helloRead = true;
    }
    decoder.feed(in);
    in.clear();
    while (std::optional<Frame> f = decoder.next()) {
      Response resp = decodeResponse(f->header, f->payload);
      got[resp.id] = std::move(resp);
    }
  }
  return got;
}

}  // namespace

TEST_CASE("tcp: a single-rank barrier frame (an older client's) and a node's frames on the wire",
          "[store][tcp][barrier]") {
  StoreServer server(localServer());
  FileDescriptor fd = rawConnect(server.port());
  std::string bytes = helloBytes("tok");
  StoreRequest one;  // rank 0 of 3, as a client that predates barrierRanks sends it
  one.op = Op::kBarrier;
  one.id = 1;
  one.arrival = {"raw", 0, 0, 3, false};
  encodeRequest(one, &bytes);
  StoreRequest node;  // a node's agent waits for ranks 1 (named twice)
  node.op = Op::kBarrierRanks;
  node.id = 2;
  node.arrival = {"raw", 0, 0, 3, true};
  node.arrival.ranks = {1, 1};
  node.number = 10000;
  encodeRequest(node, &bytes);
  StoreRequest beats;  // and writes its ranks' heartbeats at once
  beats.op = Op::kSetExpiringMany;
  beats.id = 3;
  beats.pairs = {{"hb/1", "x"}, {"hb/2", "y"}};
  beats.number = 60000;
  encodeRequest(beats, &bytes);
  StoreRequest last = one;  // rank 2 completes the barrier
  last.id = 4;
  last.arrival.rank = 2;
  encodeRequest(last, &bytes);
  rawSend(fd, bytes);
  std::map<uint64_t, Response> got = readReplies(fd, 4, milliseconds(10000));
  REQUIRE(got.size() == 4);
  CHECK(got[1].op == Op::kBarrier);
  CHECK(got[1].status == ReplyStatus::kOk);
  CHECK_FALSE(got[1].barrier.completed);
  CHECK(got[1].barrier.arrivalIndex == 1);
  CHECK(got[1].barrier.arrived == 1);
  CHECK(got[2].op == Op::kBarrier);  // barrierRanks is answered with barrier replies
  CHECK(got[2].status == ReplyStatus::kOk);
  CHECK(got[2].barrier.completed);
  CHECK(got[2].barrier.arrivalIndex == 2);
  CHECK(got[2].barrier.arrived == 3);
  CHECK(got[3].op == Op::kSetExpiringMany);
  CHECK(got[3].status == ReplyStatus::kOk);
  CHECK(got[4].barrier.completed);
  CHECK(got[4].barrier.arrivalIndex == 3);
  auto client = connectTo(server.port());
  CHECK(client->multiGet({"hb/1", "hb/2"}) ==
        std::vector<std::optional<std::string>>{std::string("x"), std::string("y")});
}

TEST_CASE("tcp: one rank goes as a barrier frame, so a server that predates barrierRanks "
          "understands it",
          "[store][tcp][barrier]") {
  // A stand-in for an older server: it answers the hello and one barrier
  // frame, and would drop the connection at an opcode it does not know.
  resilient::test::LoopbackSocket listener = resilient::test::bindLoopback(true);
  std::optional<StoreRequest> seen;
  std::thread fake([&] {
    pollfd p{listener.fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) {
      return;
    }
    FileDescriptor conn(::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
    std::string in;
    std::optional<Hello> hello;
    FrameDecoder decoder(kDefaultMaxFrameBytes, FrameKind::kRequest);
    const auto deadline = Clock::now() + milliseconds(10000);
    while (!seen && Clock::now() < deadline) {
      pollfd q{conn.get(), POLLIN, 0};
      if (::poll(&q, 1, 100) <= 0) {
        continue;
      }
      char buf[4096];
      const ssize_t n = ::recv(conn.get(), buf, sizeof buf, 0);
      if (n <= 0) {
        return;
      }
      in.append(buf, static_cast<size_t>(n));
      if (!hello) {
        size_t consumed = 0;
        hello = decodeHello(in, &consumed);
        if (!hello) {
          continue;
        }
        in.erase(0, consumed);
        std::string reply;
        encodeHelloReply(HelloReply{kVersion, HelloStatus::kOk, 7, kDefaultMaxFrameBytes}, &reply);
        ::send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
      }
      decoder.feed(in);
      in.clear();
      if (std::optional<Frame> f = decoder.next()) {
        if (f->header.op != static_cast<uint8_t>(Op::kBarrier)) {
          return;  // an opcode this server does not know: the door
        }
        seen = decodeRequest(f->header, f->payload);
        Response r;
        r.op = Op::kBarrier;
        r.id = seen->id;
        r.barrier = {false, 1, 1};
        std::string reply;
        encodeResponse(r, &reply);
        ::send(conn.get(), reply.data(), reply.size(), MSG_NOSIGNAL);
      }
    }
    std::this_thread::sleep_for(milliseconds(200));  // let the reply be read
  });
  ClientOptions o = testClientOptions();
  o.token = "tok";
  o.reconnectTimeout = milliseconds(0);
  TcpStoreClient client("127.0.0.1", listener.port, o);
  BarrierArrival a{"old", 5, 0, 8, false};
  a.ranks = {4};
  BarrierResult r;
  CHECK_NOTHROW(r = client.barrier(a, milliseconds(5000)));
  fake.join();
  REQUIRE(seen.has_value());
  CHECK(seen->op == Op::kBarrier);
  CHECK(seen->arrival.rank == 4);
  CHECK(seen->arrival.worldSize == 8);
  CHECK(seen->arrival.generation == 5);
  CHECK(r.arrivalIndex == 1);
}

TEST_CASE("tcp: batches over the frame limit are refused before sending", "[store][tcp]") {
  ServerOptions o = localServer();
  o.maxFrameBytes = 4096;
  StoreServer server(o);
  auto client = connectTo(server.port());
  std::vector<KeyValue> beats;
  for (int i = 0; i < 100; ++i) {
    beats.emplace_back("hb/" + std::to_string(i), std::string(100, 'x'));
  }
  CHECK_THROWS_AS(client->setExpiringMany(beats, milliseconds(60000)), InvalidArgument);
  BarrierArrival node{"wide", 0, 0, 4096, false};
  for (int r = 0; r < 2000; ++r) {
    node.ranks.push_back(r);
  }
  CHECK_THROWS_AS(client->barrier(node, milliseconds(5000)), InvalidArgument);
  // Nothing was sent: the connection is intact, nothing written or counted.
  CHECK_FALSE(client->exists("hb/0"));
  beats.resize(10);
  client->setExpiringMany(beats, milliseconds(60000));
  CHECK(client->exists("hb/9"));
  node.ranks.resize(100);
  CHECK(client->barrier(node, milliseconds(5000)).arrivalIndex == 1);
  CHECK(server.stats().refusedProtocol == 0);
}
