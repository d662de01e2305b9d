#include "tests/unit/transport/tcp/tcp_test_util.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "plugin/transport/tcp/handle_address.h"
#include "plugin/transport/tcp/handshake_proof.h"

namespace resilient::test {

using namespace transport::tcp;

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

int rawConnect(const std::byte* handle) {
  ListenHandle h;
  if (!decodeHandle(handle, &h).ok()) {
    return -1;
  }
  const auto address = toSocketAddress(h);
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

Hello rawHello(uint64_t nonce, uint16_t index, uint16_t nSockets) {
  Hello h;
  h.authNonce = auth::freshNonce();
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

bool readAll(int fd, void* data, size_t size) {
  auto* p = static_cast<uint8_t*>(data);
  while (size > 0) {
    const ssize_t n = ::recv(fd, p, size, 0);
    if (n <= 0) {
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

RawHandshake rawHandshake(int fd, const uint8_t* hello, const std::string& token,
                          const uint8_t* response) {
  RawHandshake r;
  timeval timeout{5, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  std::memcpy(r.hello, hello, kHelloBytes);
  if (!writeAll(fd, r.hello, kHelloBytes) || !readAll(fd, r.challengeBytes, kChallengeBytes) ||
      !decodeChallengeHeader(r.challengeBytes, &r.challenge)) {
    return r;
  }
  r.challenged = true;
  if (r.challenge.refusal != Refusal::kNone) {
    return r;
  }
  if (response != nullptr) {
    std::memcpy(r.response, response, kResponseBytes);
  } else {
    const HandshakeSecret secret(token);
    encodeResponse(Response{Verdict::kProven, secret.connectorProof(r.hello, r.challengeBytes)},
                   r.response);
  }
  uint8_t ack[kAckBytes];
  if (writeAll(fd, r.response, kResponseBytes) && readAll(fd, ack, kAckBytes)) {
    r.acked = decodeAck(ack, &r.ack);
  }
  return r;
}

void acceptWhile(transport::Listener* listener, const std::function<void()>& client,
                 std::unique_ptr<transport::RecvComm>* recvComm, int* comms) {
  std::atomic<bool> done{false};
  std::thread thread([&] {
    client();
    done = true;
  });
  while (!done) {
    std::unique_ptr<transport::RecvComm> comm;
    if (listener->accept(false, &comm).ok() && comm != nullptr) {
      if (comms != nullptr) {
        ++*comms;
      }
      if (recvComm != nullptr && *recvComm == nullptr) {
        *recvComm = std::move(comm);
      } else {
        (void)comm->close();
      }
    }
    std::this_thread::yield();
  }
  thread.join();
}

}  // namespace resilient::test
