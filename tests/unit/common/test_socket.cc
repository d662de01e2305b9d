// The common socket helper: listen, accept and connect; deadline-bounded
// exact I/O and its errors; the classification of socket errors; host:port text.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "common/clock.h"
#include "common/net/socket.h"
#include "common/net/socket_address.h"

using namespace resilient;

namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

struct Connected {
  FileDescriptor listener;
  FileDescriptor client;
  FileDescriptor server;
};

Connected connectedPair() {
  Connected c;
  Result<FileDescriptor> l = listenOn("127.0.0.1", 0);
  REQUIRE(l.ok());
  c.listener = std::move(*l);
  const SocketAddress address = localAddressOf(c.listener.get());
  REQUIRE(connectBefore(address, monotonicNs() + 5 * kSecond, &c.client) == 0);
  REQUIRE(waitReady(c.listener.get(), POLLIN, 5000).ok());
  SocketAddress peer;
  c.server = acceptConnection(c.listener.get(), &peer);
  REQUIRE(c.server.valid());
  CHECK(peer.toString() == localAddressOf(c.client.get()).toString());
  return c;
}

// A loopback port nobody listens on (bound, never listening).
SocketAddress deadPort(FileDescriptor* holder) {
  Result<FileDescriptor> fd = openStreamSocket(AF_INET);
  REQUIRE(fd.ok());
  Result<SocketAddress> any = resolveAddress("127.0.0.1", 0);
  REQUIRE(any.ok());
  REQUIRE(::bind(fd->get(), any->get(), any->length) == 0);
  *holder = std::move(*fd);
  return localAddressOf(holder->get());
}

int intOption(int fd, int level, int name) {
  int value = -1;
  socklen_t length = sizeof value;
  REQUIRE(getsockopt(fd, level, name, &value, &length) == 0);
  return value;
}

}  // namespace

TEST_CASE("a listener accepts, and exact sends and receives move every byte", "[netsocket]") {
  Connected c = connectedPair();
  const std::string message(300000, 'r');  // more than one socket buffer at a time
  std::thread sender([&] {
    CHECK(sendExact(c.client.get(), message.data(), message.size(), monotonicNs() + 10 * kSecond) ==
          0);
  });
  std::string got(message.size(), '\0');
  size_t done = 0;
  CHECK(recvExact(c.server.get(), got.data(), got.size(), monotonicNs() + 10 * kSecond, &done) ==
        0);
  sender.join();
  CHECK(done == message.size());
  CHECK(got == message);
}

TEST_CASE("exact receives end at the deadline or at the peer's close", "[netsocket]") {
  Connected c = connectedPair();
  char byte = 0;
  size_t done = 7;
  CHECK(recvExact(c.server.get(), &byte, 1, monotonicNs() + kSecond / 20, &done) == ETIMEDOUT);
  CHECK(done == 0);
  const Status timedOut = recvAll(c.server.get(), &byte, 1, monotonicNs() + kSecond / 20, "a byte");
  CHECK(timedOut.kind() == ErrorKind::kTimeout);
  CHECK(timedOut.message() == "timed out receiving a byte");

  c.client.reset();
  CHECK(recvExact(c.server.get(), &byte, 1, monotonicNs() + 5 * kSecond) == ECONNRESET);
  const Status closed = recvAll(c.server.get(), &byte, 1, monotonicNs() + 5 * kSecond, "a byte");
  CHECK(closed.kind() == ErrorKind::kRemote);
}

TEST_CASE("connecting to a port without a listener is refused, and retried until the deadline",
          "[netsocket]") {
  FileDescriptor holder;
  const SocketAddress address = deadPort(&holder);
  FileDescriptor fd;
  CHECK(connectBefore(address, monotonicNs() + 5 * kSecond, &fd) == ECONNREFUSED);
  CHECK_FALSE(fd.valid());

  const uint64_t start = monotonicNs();
  Result<FileDescriptor> retried = connectWithRetry(address, start + kSecond / 10);
  REQUIRE_FALSE(retried.ok());
  CHECK(retried.status().kind() == ErrorKind::kTimeout);
  CHECK(monotonicNs() - start >= kSecond / 10);
  CHECK(retried.status().message().find("Connection refused") != std::string::npos);
}

TEST_CASE("connectWithRetry reaches a listener that starts late", "[netsocket]") {
  FileDescriptor holder;
  const SocketAddress address = deadPort(&holder);
  std::thread late([&holder] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    REQUIRE(::listen(holder.get(), 4) == 0);
  });
  Result<FileDescriptor> fd = connectWithRetry(address, monotonicNs() + 10 * kSecond);
  late.join();
  CHECK(fd.ok());
}

TEST_CASE("socket options are applied as asked", "[netsocket]") {
  Result<FileDescriptor> fd = openStreamSocket(AF_INET);
  REQUIRE(fd.ok());
  CHECK(intOption(fd->get(), IPPROTO_TCP, TCP_NODELAY) == 0);
  REQUIRE(applySocketOptions(fd->get(), {.noDelay = true,
                                         .keepAlive = {.idleS = 7, .intervalS = 3, .count = 4},
                                         .userTimeoutMs = 2500,
                                         .bufferBytes = 0})
              .ok());
  CHECK(intOption(fd->get(), IPPROTO_TCP, TCP_NODELAY) == 1);
  CHECK(intOption(fd->get(), SOL_SOCKET, SO_KEEPALIVE) == 1);
  CHECK(intOption(fd->get(), IPPROTO_TCP, TCP_KEEPIDLE) == 7);
  CHECK(intOption(fd->get(), IPPROTO_TCP, TCP_KEEPINTVL) == 3);
  CHECK(intOption(fd->get(), IPPROTO_TCP, TCP_KEEPCNT) == 4);
  CHECK(intOption(fd->get(), IPPROTO_TCP, TCP_USER_TIMEOUT) == 2500);

  Result<FileDescriptor> plain = openStreamSocket(AF_INET);
  REQUIRE(plain.ok());
  REQUIRE(applySocketOptions(plain->get(), SocketOptions{}).ok());
  CHECK(intOption(plain->get(), SOL_SOCKET, SO_KEEPALIVE) == 0);  // keepalive off by default
  CHECK_FALSE(applySocketOptions(-1, SocketOptions{}).ok());
}

TEST_CASE("socket errors are classified by who caused them", "[netsocket]") {
  CHECK(connectionError(0, "receive", "10.0.0.2:1").kind() == ErrorKind::kRemote);
  CHECK(connectionError(0, "receive").message() == "connection closed by the peer during receive");
  for (int err : {ECONNRESET, EPIPE, ECONNABORTED, ETIMEDOUT, EHOSTUNREACH, ENETUNREACH, ENETDOWN,
                  EHOSTDOWN, ECONNREFUSED}) {
    const Status s = connectionError(err, "send", "10.0.0.2:1");
    CHECK(s.kind() == ErrorKind::kRemote);
    CHECK(s.sysErrno() == err);
    CHECK(s.peer() == "10.0.0.2:1");
  }
  CHECK(connectionError(EBADF, "send").kind() == ErrorKind::kSystem);
  CHECK(connectionError(ENOMEM, "send").kind() == ErrorKind::kSystem);
}

TEST_CASE("host:port text parses both ways", "[netsocket]") {
  Result<HostPort> v4 = parseHostPort("10.0.0.2:29500");
  REQUIRE(v4.ok());
  CHECK(v4->host == "10.0.0.2");
  CHECK(v4->port == 29500);
  Result<HostPort> v6 = parseHostPort("[fd00::2]:1");
  REQUIRE(v6.ok());
  CHECK(v6->host == "fd00::2");
  CHECK(formatHostPort(v6->host, v6->port) == "[fd00::2]:1");
  Result<HostPort> bare = parseHostPort("7000", "0.0.0.0");
  REQUIRE(bare.ok());
  CHECK(bare->host == "0.0.0.0");
  CHECK(bare->port == 7000);
  for (const char* bad : {"host:", "host:65536", "host:12x", "fd00::2:1", "[fd00::2]1", ":5"}) {
    INFO(bad);
    CHECK_FALSE(parseHostPort(bad).ok());
  }
  CHECK(parseHostPort("7000").status().kind() == ErrorKind::kInvalidUsage);
}
