#include "tests/unit/transport/tcp/tcp_test_util.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "plugin/transport/tcp/socket.h"

namespace resilient::test {

using transport::tcp::TcpOptions;
using transport::tcp::TcpTransport;

TcpOptions loopbackOptions(int family) {
  TcpOptions o;
  o.ifname = "lo";
  o.family = family;
  o.connectTimeoutMs = 5000;
  o.handshakeTimeoutMs = 2000;
  o.tcpUserTimeoutMs = 5000;
  o.nSocks = 2;
  o.nThreads = 2;
  return o;
}

TcpPair::~TcpPair() {
  if (sendComm != nullptr) {
    (void)sender->closeSend(sendComm);
  }
  if (recvComm != nullptr) {
    (void)receiver->closeRecv(recvComm);
  }
  if (listenComm != nullptr) {
    (void)receiver->closeListen(listenComm);
  }
}

uint64_t monotonicMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

Status listenOn(TcpTransport* receiver, TcpPair* pair) {
  pair->receiver = receiver;
  int ndev = 0;
  RESILIENT_TRY(receiver->devices(&ndev));
  if (ndev < 1) {
    return internalError("no device");
  }
  return receiver->listen(nullptr, 0, pair->handle, &pair->listenComm);
}

Status connectPair(TcpTransport* sender, TcpTransport* receiver, TcpPair* pair, int timeoutMs) {
  pair->sender = sender;
  if (pair->listenComm == nullptr) {
    RESILIENT_TRY(listenOn(receiver, pair));
  }
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  while (pair->sendComm == nullptr || pair->recvComm == nullptr) {
    if (pair->sendComm == nullptr) {
      RESILIENT_TRY(sender->connect(nullptr, 0, pair->handle, &pair->sendComm));
    }
    if (pair->recvComm == nullptr) {
      RESILIENT_TRY(receiver->accept(pair->listenComm, &pair->recvComm));
    }
    if (monotonicMs() > deadline) {
      return timeoutError("connectPair did not complete");
    }
    std::this_thread::yield();
  }
  return {};
}

Status waitRequest(transport::Transport* t, void* request, int* sizes, int timeoutMs) {
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  for (;;) {
    int done = 0;
    RESILIENT_TRY(t->test(request, &done, sizes));
    if (done != 0) {
      return {};
    }
    if (monotonicMs() > deadline) {
      return timeoutError("request did not complete");
    }
    std::this_thread::yield();
  }
}

void fillPattern(std::vector<uint8_t>* buf, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (uint8_t& b : *buf) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

int64_t checkPattern(const uint8_t* data, size_t size, uint32_t seed) {
  std::vector<uint8_t> expected(size);
  fillPattern(&expected, seed);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != expected[i]) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

int rawConnect(const void* handle) {
  transport::tcp::ListenHandle h;
  if (!transport::tcp::decodeHandle(handle, &h).ok()) {
    return -1;
  }
  const auto address = transport::tcp::toSocketAddress(h);
  const int fd = ::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return -1;
  }
  if (::connect(fd, address.get(), address.length) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string localAddressText(int fd) {
  return localAddressOf(fd).toString();
}

bool rawWaitClosed(int fd, int timeoutMs) {
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  for (;;) {
    const uint64_t now = monotonicMs();
    if (now >= deadline) {
      return false;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(deadline - now)) <= 0) {
      continue;
    }
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      return true;
    }
  }
}

}  // namespace resilient::test
