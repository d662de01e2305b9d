#include "bench/store/load_driver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <stdexcept>

#include "common/status.h"
#include "store/errors.h"
#include "store/tcp/protocol.h"

namespace resilient::store::bench {
namespace {

FileDescriptor openConnection(const std::string& host, uint16_t port, const std::string& token,
                              const std::string& sourceIp) {
  const std::vector<SocketAddress> addrs = valueOrThrow(resolveAll(host, port));
  const SocketAddress& addr = addrs.front();
  FileDescriptor fd(::socket(addr.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    throw std::runtime_error("socket: " + errnoText(errno));
  }
  // Closing sends a reset: no TIME_WAIT left behind by thousands of sockets.
  linger lg{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  if (!sourceIp.empty() && addr.family() == AF_INET) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, sourceIp.c_str(), &local.sin_addr);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      throw std::runtime_error("bind " + sourceIp + ": " + errnoText(errno));
    }
  }
  for (int attempt = 0;; ++attempt) {
    if (::connect(fd.get(), addr.get(), addr.length) == 0) {
      break;
    }
    if ((errno != EAGAIN && errno != ECONNREFUSED) || attempt > 100) {
      throw std::runtime_error("connect: " + errnoText(errno));
    }
    ::usleep(10000);
  }
  (void)applySocketOptions(fd.get(), SocketOptions{});
  std::string hello;
  tcp::encodeHello(tcp::Hello{tcp::kVersion, token, "bench"}, &hello);
  if (::send(fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(hello.size())) {
    throw std::runtime_error("hello: " + errnoText(errno));
  }
  char reply[tcp::kHelloReplyBytes];
  size_t got = 0;
  while (got < sizeof reply) {
    const ssize_t n = ::recv(fd.get(), reply + got, sizeof reply - got, 0);
    if (n <= 0) {
      throw std::runtime_error("hello reply: connection closed");
    }
    got += static_cast<size_t>(n);
  }
  auto r = tcp::decodeHelloReply(std::string_view(reply, sizeof reply));
  if (!r || r->status != tcp::HelloStatus::kOk) {
    throw std::runtime_error("store refused the benchmark's connection");
  }
  return fd;
}

}  // namespace

uint64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

BlockingConn::BlockingConn(const std::string& host, uint16_t port, const std::string& token,
                           const std::string& sourceIp)
    : fd_(openConnection(host, port, token, sourceIp)) {}

tcp::Response BlockingConn::call(tcp::StoreRequest req) {
  req.id = nextId_++;
  std::string frame;
  tcp::encodeRequest(req, &frame);
  if (::send(fd_.get(), frame.data(), frame.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(frame.size())) {
    throw std::runtime_error("probe send: " + errnoText(errno));
  }
  for (;;) {
    if (std::optional<tcp::Frame> f = decoder_.next()) {
      return tcp::decodeResponse(f->header, f->payload);
    }
    char* buf = decoder_.writable(4096);
    const ssize_t n = ::recv(fd_.get(), buf, 4096, 0);
    if (n <= 0) {
      throw std::runtime_error("probe: connection closed");
    }
    decoder_.commit(static_cast<size_t>(n));
  }
}

LoadDriver::LoadDriver(const LoadDriverOptions& options) : events_(1024) {
  if (Status s = events_.status(); !s.ok()) {
    throw std::runtime_error(s.toString());
  }
  conns_.resize(static_cast<size_t>(options.connections));
  for (int i = 0; i < options.connections; ++i) {
    Conn& c = conns_[static_cast<size_t>(i)];
    c.fd = openConnection(options.host, options.port, options.token, options.sourceIp);
    c.rank = options.firstRank + i;
    (void)setNonBlocking(c.fd.get());
    if (Status s = events_.add(c.fd.get(), EventLoop::kReadable | EventLoop::kEdgeTriggered, &c);
        !s.ok()) {
      throw std::runtime_error(s.toString());
    }
  }
}

LoadDriver::~LoadDriver() = default;

void LoadDriver::sendFrame(Conn& c, const std::string& frame) {
  size_t off = 0;
  while (off < frame.size()) {
    const ssize_t n = ::send(c.fd.get(), frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      continue;  // a full send buffer drains quickly on loopback
    } else {
      throw std::runtime_error("send: " + errnoText(errno));
    }
  }
}

void LoadDriver::sendBarrier(const std::string& name, uint64_t generation, int worldSize,
                             bool holdLast, BarrierTimes* times) {
  name_ = name;
  generation_ = generation;
  worldSize_ = worldSize;
  *times = BarrierTimes{};
  tcp::StoreRequest req;
  req.op = tcp::Op::kBarrier;
  req.arrival = {name, generation, 0, worldSize, true};
  req.number = 600000;
  std::string frame;
  const size_t n = conns_.size() - (holdLast ? 1 : 0);
  times->firstSendNs = monotonicNs();
  for (size_t i = 0; i < conns_.size(); ++i) {
    Conn& c = conns_[i];
    c.done = false;
    req.id = generation;
    req.arrival.rank = c.rank;
    frame.clear();
    tcp::encodeRequest(req, &frame);
    // As TcpStoreClient does for a blocking call: the release is ACKed when read.
    setQuickAck(c.fd.get(), true);
    if (i >= n) {
      heldFrame_ = frame;
      continue;
    }
    sendFrame(c, frame);
  }
  times->lastSendNs = monotonicNs();
}

void LoadDriver::sendHeld(BarrierTimes* times) {
  times->lastSendNs = monotonicNs();
  sendFrame(conns_.back(), heldFrame_);
}

int LoadDriver::drain(Conn& c, uint32_t* errors) {
  int completed = 0;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (n > 0) {
      // Usually one whole reply: decoded in place, the per-connection
      // decoder only keeps the bytes of a frame cut by the recv.
      std::string_view data(buf, static_cast<size_t>(n));
      if (c.decoder.buffered() > 0) {
        c.decoder.feed(data);
        data = {};
      }
      while (!data.empty() && data.size() >= tcp::kFrameHeaderBytes) {
        const tcp::FrameHeader h =
            tcp::decodeFrameHeader(data, size_t{64} * 1024, tcp::FrameKind::kReply);
        if (data.size() - tcp::kFrameHeaderBytes < h.length) {
          break;
        }
        const tcp::Response r =
            tcp::decodeResponse(h, data.substr(tcp::kFrameHeaderBytes, h.length));
        if (r.status != tcp::ReplyStatus::kOk) {
          ++*errors;
        }
        ++completed;
        data.remove_prefix(tcp::kFrameHeaderBytes + h.length);
      }
      if (!data.empty()) {
        c.decoder.feed(data);
      }
      while (std::optional<tcp::Frame> f = c.decoder.next()) {
        tcp::Response r = tcp::decodeResponse(f->header, f->payload);
        if (r.status != tcp::ReplyStatus::kOk) {
          ++*errors;
        }
        ++completed;
      }
      if (static_cast<size_t>(n) < sizeof buf) {
        break;
      }
      continue;
    }
    if (n == 0) {
      throw std::runtime_error("the store closed a benchmark connection");
    }
    if (errno == EINTR) {
      continue;
    }
    break;  // EAGAIN
  }
  c.decoder.shrinkIfEmpty();
  return completed;
}

void LoadDriver::awaitReleases(BarrierTimes* times, int timeoutMs) {
  const uint64_t deadline = monotonicNs() + static_cast<uint64_t>(timeoutMs) * 1000000ull;
  uint32_t remaining = static_cast<uint32_t>(conns_.size());
  while (remaining > 0 && monotonicNs() < deadline) {
    const Result<int> n = events_.wait(100, [&](void* tag, uint32_t /*events*/) {
      Conn& c = *static_cast<Conn*>(tag);
      if (drain(c, &times->errors) > 0 && !c.done) {
        c.done = true;
        const uint64_t now = monotonicNs();
        if (times->released == 0) {
          times->firstReleaseNs = now;
        }
        times->lastReleaseNs = now;
        ++times->released;
        --remaining;
      }
    });
    if (n.ok() && *n > 0 && batchUs_ > 0 && remaining > 0) {
      ::usleep(static_cast<useconds_t>(batchUs_));
    }
  }
}

uint64_t LoadDriver::runOps(tcp::Op op, int durationMs) {
  tcp::StoreRequest req;
  req.op = op;
  std::vector<std::string> frames(conns_.size());
  for (size_t i = 0; i < conns_.size(); ++i) {
    req.key = "bench/" + std::to_string(conns_[i].rank);
    req.value = "0123456789abcdef";
    req.number = 1;
    if (op == tcp::Op::kAdd) {
      req.key = "bench/counter/" + std::to_string(conns_[i].rank);
    }
    tcp::encodeRequest(req, &frames[i]);
  }
  for (size_t i = 0; i < conns_.size(); ++i) {
    sendFrame(conns_[i], frames[i]);
  }
  const uint64_t end = monotonicNs() + static_cast<uint64_t>(durationMs) * 1000000ull;
  uint64_t completed = 0;
  uint32_t errors = 0;
  size_t outstanding = conns_.size();
  bool sending = true;
  while (outstanding > 0) {
    if (sending && monotonicNs() >= end) {
      sending = false;
    }
    (void)events_.wait(100, [&](void* tag, uint32_t /*events*/) {
      Conn& c = *static_cast<Conn*>(tag);
      const int got = drain(c, &errors);
      if (got == 0) {
        return;
      }
      completed += static_cast<uint64_t>(got);
      if (sending) {
        sendFrame(c, frames[static_cast<size_t>(&c - conns_.data())]);
      } else {
        --outstanding;
      }
    });
  }
  if (errors > 0) {
    throw std::runtime_error(std::to_string(errors) + " operations failed");
  }
  return completed;
}

}  // namespace resilient::store::bench
