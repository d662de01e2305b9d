// socketOptions(TcpOptions), applied by the common socket helper: what every
// socket of our TCP transport is set to.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <fstream>

#include <catch2/catch.hpp>

#include "common/file_descriptor.h"
#include "common/net/socket.h"
#include "plugin/transport/tcp/options.h"

using namespace resilient;
using namespace resilient::transport::tcp;

namespace {

int intOption(const FileDescriptor& fd, int level, int name) {
  int value = -1;
  socklen_t length = sizeof value;
  REQUIRE(getsockopt(fd.get(), level, name, &value, &length) == 0);
  return value;
}

// net.core.{w,r}mem_max: the kernel's cap on SO_SNDBUF / SO_RCVBUF (0 where
// /proc/sys is not readable, as in some containers).
int coreMax(const char* name) {
  std::ifstream in(std::string("/proc/sys/net/core/") + name);
  int value = 0;
  in >> value;
  return in ? value : 0;
}

// What the kernel reports after SO_*BUF = bytes: twice the value, capped.
void checkBuffer(const FileDescriptor& fd, int name, int bytes, int cap, int untouched) {
  if (cap > 0) {
    CHECK(intOption(fd, SOL_SOCKET, name) == 2 * std::min(bytes, cap));
  } else {
    CHECK(intOption(fd, SOL_SOCKET, name) != untouched);
  }
}

FileDescriptor freshSocket() {
  Result<FileDescriptor> fd = openStreamSocket(AF_INET);
  REQUIRE(fd.ok());
  return std::move(*fd);
}

Status setConnectionOptions(int fd, const TcpOptions& options) {
  return applySocketOptions(fd, socketOptions(options));
}

}  // namespace

TEST_CASE("every socket gets no-delay, the user timeout and keepalive", "[tcp][sockopt]") {
  FileDescriptor fd = freshSocket();
  TcpOptions o;
  o.tcpUserTimeoutMs = 1234;
  REQUIRE(setConnectionOptions(fd.get(), o).ok());
  CHECK(intOption(fd, IPPROTO_TCP, TCP_NODELAY) == 1);
  CHECK(intOption(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == 1234);
  CHECK(intOption(fd, SOL_SOCKET, SO_KEEPALIVE) == 1);
}

TEST_CASE("socket buffers: autotuned unless a size is given", "[tcp][sockopt]") {
  const FileDescriptor untouched = freshSocket();
  SECTION("0 leaves the kernel's sizes") {
    FileDescriptor fd = freshSocket();
    REQUIRE(setConnectionOptions(fd.get(), TcpOptions{}).ok());
    CHECK(intOption(fd, SOL_SOCKET, SO_SNDBUF) == intOption(untouched, SOL_SOCKET, SO_SNDBUF));
    CHECK(intOption(fd, SOL_SOCKET, SO_RCVBUF) == intOption(untouched, SOL_SOCKET, SO_RCVBUF));
  }
  SECTION("a size sets both directions (the kernel doubles it, up to its cap)") {
    FileDescriptor fd = freshSocket();
    TcpOptions o;
    o.socketBufferBytes = 96 << 10;
    REQUIRE(setConnectionOptions(fd.get(), o).ok());
    checkBuffer(fd, SO_SNDBUF, o.socketBufferBytes, coreMax("wmem_max"),
                intOption(untouched, SOL_SOCKET, SO_SNDBUF));
    checkBuffer(fd, SO_RCVBUF, o.socketBufferBytes, coreMax("rmem_max"),
                intOption(untouched, SOL_SOCKET, SO_RCVBUF));
  }
}
