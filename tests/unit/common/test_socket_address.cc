#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <catch2/catch.hpp>

#include "common/file_descriptor.h"
#include "common/net/socket_address.h"

using namespace resilient;

TEST_CASE("socket addresses print, carry a port and resolve", "[socket]") {
  SECTION("IPv4") {
    Result<SocketAddress> a = resolveAddress("127.0.0.1", 40000);
    REQUIRE(a.ok());
    CHECK(a->family() == AF_INET);
    CHECK(a->length == sizeof(sockaddr_in));
    CHECK(a->port() == 40000);
    CHECK(a->hostText() == "127.0.0.1");
    CHECK(a->toString() == "127.0.0.1:40000");
    a->setPort(7);
    CHECK(a->toString() == "127.0.0.1:7");
  }
  SECTION("IPv6, with and without a scope") {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(5);
    REQUIRE(inet_pton(AF_INET6, "fd00::2", &in6.sin6_addr) == 1);
    SocketAddress a = SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&in6));
    CHECK(a.length == sizeof(sockaddr_in6));
    CHECK(a.toString() == "[fd00::2]:5");
    in6.sin6_scope_id = 3;
    a = SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&in6));
    CHECK(a.hostText() == "fd00::2%3");
    CHECK(a.toString() == "[fd00::2%3]:5");
  }
  SECTION("no address, another family") {
    CHECK(SocketAddress{}.toString() == "?");
    CHECK(SocketAddress{}.port() == 0);
    CHECK(SocketAddress::fromSockaddr(nullptr).length == 0);
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    CHECK(SocketAddress::fromSockaddr(reinterpret_cast<const sockaddr*>(&un)).length == 0);
  }
  SECTION("a name that does not resolve") {
    Result<SocketAddress> a = resolveAddress("no such host.invalid", 1);
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(a.status().message(), Catch::Contains("no such host.invalid"));
  }
}

TEST_CASE("local and peer addresses of a socket", "[socket]") {
  FileDescriptor listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(listener.valid());
  Result<SocketAddress> any = resolveAddress("127.0.0.1", 0);
  REQUIRE(any.ok());
  REQUIRE(::bind(listener.get(), any->get(), any->length) == 0);
  REQUIRE(::listen(listener.get(), 1) == 0);
  const SocketAddress bound = localAddressOf(listener.get());
  REQUIRE(bound.length != 0);
  CHECK(bound.port() != 0);

  FileDescriptor client(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(::connect(client.get(), bound.get(), bound.length) == 0);
  CHECK(peerAddressOf(client.get()).toString() == bound.toString());
  CHECK(peerAddressOf(listener.get()).length == 0);  // not connected
  CHECK(localAddressOf(-1).length == 0);
}

TEST_CASE("a file descriptor is closed once, by its last owner", "[socket]") {
  int raw[2];
  REQUIRE(::pipe2(raw, O_CLOEXEC) == 0);
  ::close(raw[1]);
  FileDescriptor a(raw[0]);
  FileDescriptor b(std::move(a));
  CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): moved-from is empty
  CHECK(b.get() == raw[0]);
  CHECK(::fcntl(raw[0], F_GETFD) != -1);
  b.reset();
  CHECK(::fcntl(raw[0], F_GETFD) == -1);  // closed
  FileDescriptor c(::dup(STDIN_FILENO));
  const int kept = c.release();
  CHECK_FALSE(c.valid());
  CHECK(::fcntl(kept, F_GETFD) != -1);  // not closed by c
  ::close(kept);
}
