#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/token_digest.h"
#include "plugin/transport/tcp/listener.h"
#include "plugin/transport/tcp/tcp_transport.h"
#include "plugin/transport/tcp/wire.h"
#include "tests/support/mock_logger.h"
#include "tests/support/transport_pair.h"
#include "tests/unit/transport/tcp/tcp_test_util.h"

using namespace resilient;
using namespace resilient::transport::tcp;
using resilient::test::TransportPair;

namespace {

size_t openFdCount() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) {  // NOLINT(concurrency-mt-unsafe): one thread reads this DIR
      ++n;
    }
    closedir(d);
  }
  return n;
}

Hello validHello(const std::string& token, uint64_t nonce, uint16_t index, uint16_t nSockets) {
  Hello h;
  h.tokenDigest = tokenDigest(token);
  h.nonce = nonce;
  h.socketIndex = index;
  h.nSockets = nSockets;
  h.chunkBytes = 64u << 10;
  h.pid = 1;
  std::strcpy(h.hostname, "raw-test");
  return h;
}

bool writeAll(int fd, const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n <= 0) {
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// True when `fd` reached EOF or an error (without blocking).
bool closedNow(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) {
    return false;
  }
  char buf[512];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      return true;
    }
    if (n < 0) {
      return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
  }
}

// Polls accept() until `ackFd` has a complete ack (or timeout); collects any
// comm accept() returns into *recvComm.
bool readAckWhileAccepting(TcpTransport* t, void* listenComm, int ackFd, Ack* ack,
                           void** recvComm = nullptr) {
  uint8_t bytes[kAckBytes];
  size_t got = 0;
  const uint64_t deadline = test::monotonicMs() + 3000;
  while (got < kAckBytes && test::monotonicMs() < deadline) {
    void* comm = nullptr;
    if (!t->accept(listenComm, &comm).ok()) {
      return false;
    }
    if (comm != nullptr) {
      if (recvComm != nullptr) {
        *recvComm = comm;
      } else {
        (void)t->closeRecv(comm);
      }
    }
    const ssize_t n = ::recv(ackFd, bytes + got, kAckBytes - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return false;
    }
    std::this_thread::yield();
  }
  return got == kAckBytes && decodeAck(bytes, ack);
}

}  // namespace

TEST_CASE("a wrong job token is refused and the connector names the listener",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions listenOptions = test::loopbackOptions(AF_INET);
  TcpOptions connectOptions = test::loopbackOptions(AF_INET);
  SECTION("different tokens") {
    listenOptions.jobToken = "job-alpha";
    connectOptions.jobToken = "job-beta";
  }
  SECTION("a token on one side only") {
    listenOptions.jobToken = "job-alpha";
  }
  TcpTransport receiver(listenOptions);
  TcpTransport sender(connectOptions);
  TransportPair pair;
  const Status s = test::connectPair(&sender, &receiver, &pair);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK_THAT(s.message(), Catch::Contains("job token mismatch"));
  auto* listener = static_cast<ListenComm*>(pair.listenComm);
  CHECK(s.peer() == listener->address().toString());
  CHECK(pair.sendComm == nullptr);
  CHECK(pair.recvComm == nullptr);
  // The listener logged the refusal once (rate-limited) and kept nothing.
  for (int i = 0; i < 100 && listener->incomingCount() > 0; ++i) {
    void* comm = nullptr;
    REQUIRE(receiver.accept(pair.listenComm, &comm).ok());
    CHECK(comm == nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(listener->incomingCount() == 0);
  CHECK(logger.count(NCCL_LOG_WARN, "job token mismatch") >= 1);
}

TEST_CASE(
    "garbage and half handshakes on a listen port are dropped while a real connection "
    "succeeds",
    "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const size_t fdsBefore = openFdCount();
  {
    TcpOptions o = test::loopbackOptions(AF_INET);
    o.jobToken = "job-1";
    o.handshakeTimeoutMs = 300;
    TcpTransport receiver(o);
    TcpTransport sender(o);
    TransportPair pair;
    REQUIRE(test::listenOn(&receiver, &pair).ok());
    auto* listener = static_cast<ListenComm*>(pair.listenComm);

    // 1. An HTTP request.
    const int http = test::rawConnect(pair.handle);
    REQUIRE(http >= 0);
    const char get[] = "GET / HTTP/1.0\r\n\r\n";
    REQUIRE(writeAll(http, get, sizeof get - 1));
    // 2. A megabyte of junk.
    const int junk = test::rawConnect(pair.handle);
    REQUIRE(junk >= 0);
    std::vector<uint8_t> noise(1u << 20);
    test::fillPattern(&noise, 77);
    std::thread junkWriter([&] { (void)writeAll(junk, noise.data(), noise.size()); });
    // 3. Half a hello, then silence.
    const int half = test::rawConnect(pair.handle);
    REQUIRE(half >= 0);
    uint8_t hello[kHelloBytes];
    encodeHello(validHello("job-1", 42, 0, 3), hello);
    REQUIRE(writeAll(half, hello, kHelloBytes / 2));
    // 4. Connected, silent.
    const int silent = test::rawConnect(pair.handle);
    REQUIRE(silent >= 0);
    // 5. A complete, valid hello for a connection whose other sockets never come.
    const int lonely = test::rawConnect(pair.handle);
    REQUIRE(lonely >= 0);
    encodeHello(validHello("job-1", 43, 0, 3), hello);
    REQUIRE(writeAll(lonely, hello, kHelloBytes));

    // A real connection succeeds meanwhile, and carries data.
    REQUIRE(test::connectPair(&sender, &receiver, &pair).toString() == "ok");
    REQUIRE(test::roundTrip(pair, 200000, 5, 0).toString() == "ok");

    // Keep polling accept: every bad socket is closed by the handshake deadline.
    const int fds[] = {http, junk, half, silent, lonely};
    bool closed[5] = {};
    const uint64_t deadline = test::monotonicMs() + 3000;
    while (test::monotonicMs() < deadline) {
      void* comm = nullptr;
      REQUIRE(receiver.accept(pair.listenComm, &comm).ok());
      REQUIRE(comm == nullptr);
      bool all = true;
      for (int i = 0; i < 5; ++i) {
        closed[i] = closed[i] || closedNow(fds[i]);
        all = all && closed[i];
      }
      if (all && listener->incomingCount() == 0) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    for (int i = 0; i < 5; ++i) {
      CAPTURE(i);
      CHECK(closed[i]);
    }
    CHECK(listener->incomingCount() == 0);
    junkWriter.join();
    for (const int fd : fds) {
      ::close(fd);
    }
    CHECK(logger.count(NCCL_LOG_WARN, "dropped a connection") >= 1);
  }
  CHECK(openFdCount() == fdsBefore);  // nothing leaked
}

TEST_CASE("a listener refuses bad versions and duplicate sockets with a reason",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o = test::loopbackOptions(AF_INET);
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::listenOn(&receiver, &pair).ok());

  SECTION("version") {
    const int fd = test::rawConnect(pair.handle);
    REQUIRE(fd >= 0);
    uint8_t hello[kHelloBytes];
    encodeHello(validHello("", 7, 0, 2), hello);
    hello[4] = 9;  // a future version
    REQUIRE(writeAll(fd, hello, sizeof hello));
    Ack ack;
    REQUIRE(readAckWhileAccepting(&receiver, pair.listenComm, fd, &ack));
    CHECK(ack.refusal == Refusal::kBadVersion);
    CHECK(ack.version == kProtocolVersion);
    ::close(fd);
  }
  SECTION("duplicate index, then inconsistent sizes, then the real socket completes") {
    uint8_t hello[kHelloBytes];
    const int first = test::rawConnect(pair.handle);
    REQUIRE(first >= 0);
    encodeHello(validHello("", 9, 0, 2), hello);
    REQUIRE(writeAll(first, hello, sizeof hello));
    Ack ack;
    REQUIRE(readAckWhileAccepting(&receiver, pair.listenComm, first, &ack));
    CHECK(ack.refusal == Refusal::kNone);

    const int dup = test::rawConnect(pair.handle);
    REQUIRE(dup >= 0);
    REQUIRE(writeAll(dup, hello, sizeof hello));  // index 0 again
    REQUIRE(readAckWhileAccepting(&receiver, pair.listenComm, dup, &ack));
    CHECK(ack.refusal == Refusal::kDuplicate);

    const int odd = test::rawConnect(pair.handle);
    REQUIRE(odd >= 0);
    encodeHello(validHello("", 9, 1, 3), hello);  // says 3 sockets, the first said 2
    REQUIRE(writeAll(odd, hello, sizeof hello));
    REQUIRE(readAckWhileAccepting(&receiver, pair.listenComm, odd, &ack));
    CHECK(ack.refusal == Refusal::kBadHello);

    const int second = test::rawConnect(pair.handle);
    REQUIRE(second >= 0);
    encodeHello(validHello("", 9, 1, 2), hello);
    REQUIRE(writeAll(second, hello, sizeof hello));
    void* comm = nullptr;
    REQUIRE(readAckWhileAccepting(&receiver, pair.listenComm, second, &ack, &comm));
    CHECK(ack.refusal == Refusal::kNone);
    for (int i = 0; i < 100 && comm == nullptr; ++i) {
      REQUIRE(receiver.accept(pair.listenComm, &comm).ok());
    }
    REQUIRE(comm != nullptr);
    transport::Endpoint local;
    transport::Endpoint peer;
    REQUIRE(receiver.endpoints(comm, &local, &peer));
    CHECK(std::string(peer.text) == test::localAddressText(first));
    CHECK(receiver.closeRecv(comm).ok());
    for (const int fd : {first, dup, odd, second}) {
      ::close(fd);
    }
  }
  CHECK(logger.count(NCCL_LOG_WARN, "refused") >= 1);
}

TEST_CASE("connect gives up after connectTimeoutMs when nobody listens, naming the address",
          "[transport][tcp][handshake]") {
  // A bound port that is not listening: connections to it are refused.
  const int placeholder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(placeholder >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(placeholder, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(placeholder, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ListenHandle h;
  h.family = AF_INET;
  h.port = ntohs(addr.sin_port);
  std::memcpy(h.address, &addr.sin_addr, 4);
  uint8_t handle[transport::kHandleSize] = {};
  encodeHandle(h, handle);

  TcpOptions o = test::loopbackOptions(AF_INET);
  o.connectTimeoutMs = 300;
  TcpTransport sender(o);
  const uint64_t start = test::monotonicMs();
  Status s;
  void* comm = nullptr;
  while (s.ok() && comm == nullptr && test::monotonicMs() < start + 5000) {
    s = sender.connect(nullptr, 0, handle, &comm);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const uint64_t elapsed = test::monotonicMs() - start;
  ::close(placeholder);
  REQUIRE_FALSE(s.ok());
  CHECK(comm == nullptr);
  CHECK(s.kind() == ErrorKind::kTimeout);
  CHECK(s.peer() == "127.0.0.1:" + std::to_string(h.port));
  CHECK_THAT(s.message(), Catch::Contains("refused"));
  CHECK(elapsed >= 290);
  CHECK(elapsed < 3000);
  CHECK(toNcclResult(s) == ncclRemoteError);

  SECTION("a later connect with the same buffer starts afresh") {
    comm = nullptr;
    const Status again = sender.connect(nullptr, 0, handle, &comm);
    CHECK(again.ok());  // in progress again
    CHECK(comm == nullptr);
  }
}

TEST_CASE("connect refuses a malformed handle at once", "[transport][tcp][handshake]") {
  TcpTransport sender(test::loopbackOptions(AF_INET));
  uint8_t junk[transport::kHandleSize];
  std::memset(junk, 0x5a, sizeof junk);
  void* comm = nullptr;
  const Status s = sender.connect(nullptr, 0, junk, &comm);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK(comm == nullptr);
  CHECK_FALSE(sender.connect(nullptr, 7, junk, &comm).ok());  // no device 7
}

TEST_CASE("several connections to one listener are told apart by their nonce",
          "[transport][tcp][handshake]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.nSocks = 3;
  TcpTransport receiver(o);
  TcpTransport sender(o);
  TransportPair pair;
  REQUIRE(test::listenOn(&receiver, &pair).ok());
  constexpr int kConns = 4;
  // Each connection polls with its own copy of the handle (a distinct buffer).
  uint8_t handles[kConns][transport::kHandleSize];
  void* send[kConns] = {};
  std::vector<void*> recv;
  for (auto& h : handles) {
    std::memcpy(h, pair.handle, sizeof h);
  }
  const uint64_t deadline = test::monotonicMs() + 5000;
  int connected = 0;
  while ((connected < kConns || recv.size() < kConns) && test::monotonicMs() < deadline) {
    for (int i = 0; i < kConns; ++i) {
      if (send[i] == nullptr) {
        REQUIRE(sender.connect(nullptr, 0, handles[i], &send[i]).ok());
        connected += send[i] != nullptr;
      }
    }
    void* comm = nullptr;
    REQUIRE(receiver.accept(pair.listenComm, &comm).ok());
    if (comm != nullptr) {
      recv.push_back(comm);
    }
  }
  REQUIRE(connected == kConns);
  REQUIRE(recv.size() == kConns);
  // Pair them up by endpoints and check each carries its own data.
  for (int i = 0; i < kConns; ++i) {
    transport::Endpoint sLocal;
    REQUIRE(sender.endpoints(send[i], &sLocal, nullptr));
    void* match = nullptr;
    for (void* r : recv) {
      transport::Endpoint rPeer;
      REQUIRE(receiver.endpoints(r, nullptr, &rPeer));
      if (std::string(rPeer.text) == sLocal.text) {
        match = r;
      }
    }
    REQUIRE(match != nullptr);
    uint64_t value = 0x1111111111111111ull * static_cast<uint64_t>(i + 1);
    uint64_t out = 0;
    void* data = &out;
    const size_t cap = sizeof out;
    const int tag = i;
    void* rreq = nullptr;
    void* sreq = nullptr;
    REQUIRE(receiver.irecv(match, 1, &data, &cap, &tag, nullptr, nullptr, &rreq).ok());
    REQUIRE(sender.isend(send[i], &value, sizeof value, i, nullptr, nullptr, &sreq).ok());
    REQUIRE(test::waitRequest(&sender, sreq).ok());
    REQUIRE(test::waitRequest(&receiver, rreq).ok());
    CHECK(out == value);
  }
  for (int i = 0; i < kConns; ++i) {
    CHECK(sender.closeSend(send[i]).ok());
  }
  for (void* r : recv) {
    CHECK(receiver.closeRecv(r).ok());
  }
}
