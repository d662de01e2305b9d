#include "hostengine/rendezvous.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/little_endian.h"
#include "common/log.h"
#include "common/net/socket.h"

namespace resilient::hostengine {
namespace {

constexpr uint64_t kHelloTimeoutNs = 10ull * 1000000000ull;  // a connection must say HELLO
constexpr uint64_t kServerSendTimeoutNs = 5ull * 1000000000ull;
constexpr size_t kMaxPendingConnections = 64;  // connections that have not said HELLO yet

uint32_t lengthLimit(RendezvousFrame type) noexcept {
  switch (type) {
    case RendezvousFrame::kHello:
    case RendezvousFrame::kBye: return 0;
    case RendezvousFrame::kGather: return kRendezvousMaxPayload;
    case RendezvousFrame::kReply: return kRendezvousMaxReply;
    case RendezvousFrame::kAbort: return kRendezvousMaxAbortText;
  }
  return 0;
}

std::string frameBytes(const RendezvousHeader& header, std::string_view payload) {
  std::string out(kRendezvousHeaderBytes + payload.size(), '\0');
  encodeRendezvousHeader(header, reinterpret_cast<uint8_t*>(out.data()));
  if (!payload.empty()) {
    std::memcpy(out.data() + kRendezvousHeaderBytes, payload.data(), payload.size());
  }
  return out;
}

}  // namespace

void encodeRendezvousHeader(const RendezvousHeader& header, uint8_t* out) noexcept {
  putU32(out, header.magic);
  putU16(out + 4, header.version);
  putU16(out + 6, static_cast<uint16_t>(header.type));
  putU64(out + 8, header.token);
  putU32(out + 16, header.rank);
  putU32(out + 20, header.worldSize);
  putU32(out + 24, header.round);
  putU32(out + 28, header.length);
}

Status decodeRendezvousHeader(const uint8_t* bytes, RendezvousHeader* out) {
  RendezvousHeader h;
  h.magic = getU32(bytes);
  h.version = getU16(bytes + 4);
  const uint16_t type = getU16(bytes + 6);
  h.token = getU64(bytes + 8);
  h.rank = getU32(bytes + 16);
  h.worldSize = getU32(bytes + 20);
  h.round = getU32(bytes + 24);
  h.length = getU32(bytes + 28);
  if (h.magic != kRendezvousMagic) {
    return invalidUsage("rendezvous: bad magic (not a rendezvous peer)");
  }
  if (h.version != kRendezvousVersion) {
    return invalidUsage("rendezvous: protocol version " + std::to_string(h.version) +
                        ", expected " + std::to_string(kRendezvousVersion));
  }
  if (type < static_cast<uint16_t>(RendezvousFrame::kHello) ||
      type > static_cast<uint16_t>(RendezvousFrame::kBye)) {
    return invalidUsage("rendezvous: unknown frame type " + std::to_string(type));
  }
  h.type = static_cast<RendezvousFrame>(type);
  if (h.worldSize == 0 || h.worldSize > kRendezvousMaxWorld) {
    return invalidUsage("rendezvous: world size " + std::to_string(h.worldSize) + " outside 1.." +
                        std::to_string(kRendezvousMaxWorld));
  }
  if (h.rank >= h.worldSize) {
    return invalidUsage("rendezvous: rank " + std::to_string(h.rank) + " outside 0.." +
                        std::to_string(h.worldSize - 1));
  }
  if (h.length > lengthLimit(h.type)) {
    return invalidUsage("rendezvous: payload of " + std::to_string(h.length) +
                        " bytes exceeds the limit of " + std::to_string(lengthLimit(h.type)));
  }
  *out = h;
  return {};
}

std::string encodeGathered(const std::vector<std::string>& parts) {
  size_t total = 0;
  for (const std::string& p : parts) {
    total += 4 + p.size();
  }
  std::string out(total, '\0');
  size_t at = 0;
  for (const std::string& p : parts) {
    putU32(reinterpret_cast<uint8_t*>(out.data() + at), static_cast<uint32_t>(p.size()));
    std::memcpy(out.data() + at + 4, p.data(), p.size());
    at += 4 + p.size();
  }
  return out;
}

Result<std::vector<std::string>> decodeGathered(std::string_view payload, uint32_t worldSize) {
  std::vector<std::string> parts;
  parts.reserve(worldSize);
  size_t at = 0;
  for (uint32_t r = 0; r < worldSize; ++r) {
    if (payload.size() - at < 4) {
      return invalidUsage("rendezvous: reply truncated at rank " + std::to_string(r));
    }
    const uint32_t len = getU32(reinterpret_cast<const uint8_t*>(payload.data() + at));
    at += 4;
    if (len > kRendezvousMaxPayload || payload.size() - at < len) {
      return invalidUsage("rendezvous: bad length " + std::to_string(len) + " for rank " +
                          std::to_string(r));
    }
    parts.emplace_back(payload.substr(at, len));
    at += len;
  }
  if (at != payload.size()) {
    return invalidUsage("rendezvous: " + std::to_string(payload.size() - at) +
                        " stray bytes after the reply");
  }
  return parts;
}

// ---------------------------------------------------------------------------
// Server

struct RendezvousServer::Client {
  FileDescriptor fd;
  int rank = -1;  // -1 until a valid HELLO
  std::string in;
  uint64_t sinceNs = 0;
  bool dead = false;
};

RendezvousServer::RendezvousServer(FileDescriptor listenFd, uint32_t worldSize, uint64_t token)
    : listen_(std::move(listenFd)), worldSize_(worldSize), token_(token) {}

Result<std::unique_ptr<RendezvousServer>> RendezvousServer::start(FileDescriptor listenFd,
                                                                  uint32_t worldSize,
                                                                  uint64_t token) {
  if (worldSize == 0 || worldSize > kRendezvousMaxWorld) {
    return invalidUsage("rendezvous: world size " + std::to_string(worldSize) + " outside 1.." +
                        std::to_string(kRendezvousMaxWorld));
  }
  RESILIENT_TRY(setNonBlocking(listenFd.get()));
  const SocketAddress bound = localAddressOf(listenFd.get());
  if (bound.length == 0) {
    return systemError("getsockname");
  }
  std::unique_ptr<RendezvousServer> server(
      new RendezvousServer(std::move(listenFd), worldSize, token));
  RESILIENT_TRY(server->events_.status());
  RESILIENT_TRY(server->events_.add(server->listen_.get(), EventLoop::kReadable, &server->listen_));
  server->port_ = bound.port();
  server->thread_ = std::thread([s = server.get()] { s->serve(); });
  return server;
}

RendezvousServer::~RendezvousServer() {
  stop();
}

void RendezvousServer::stop() noexcept {
  if (thread_.joinable()) {
    stopping_.store(true);
    events_.wake();
    thread_.join();
  }
}

// serve()'s state: the connections, the round being gathered, and who left.
struct RendezvousServer::Serving {
  explicit Serving(RendezvousServer& s)
      : server(s), byRank(s.worldSize_, nullptr), parts(s.worldSize_), have(s.worldSize_, false) {}

  void send(Client& c, RendezvousFrame type, std::string_view payload);
  void abortAll(const std::string& reason);
  void refuse(Client& c, const std::string& why);
  void handle(Client& c, const RendezvousHeader& h, std::string_view payload);
  void hello(Client& c, const RendezvousHeader& h);
  void gather(Client& c, const RendezvousHeader& h, std::string_view payload);
  void acceptAll();
  void readFrom(Client& c);
  void sweep();

  RendezvousServer& server;
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<Client*> byRank;
  std::vector<std::string> parts;
  std::vector<bool> have;
  uint32_t haveCount = 0;
  uint32_t round = 0;
  uint32_t gone = 0;  // ranks that said BYE or left
  bool aborted = false;
  std::string abortReason;
};

void RendezvousServer::Serving::send(Client& c, RendezvousFrame type, std::string_view payload) {
  if (c.dead) {
    return;
  }
  RendezvousHeader h;
  h.type = type;
  h.token = server.token_;
  h.rank = static_cast<uint32_t>(c.rank);
  h.worldSize = server.worldSize_;
  h.round = round;
  h.length = static_cast<uint32_t>(payload.size());
  const std::string frame = frameBytes(h, payload);
  const Status s = sendAll(c.fd.get(), frame.data(), frame.size(),
                           monotonicNs() + kServerSendTimeoutNs, "a rendezvous reply");
  if (!s.ok()) {
    RES_WARN(NCCL_INIT, "rendezvous: cannot answer rank %d: %s", c.rank, s.toString().c_str());
    c.dead = true;
  }
}

void RendezvousServer::Serving::abortAll(const std::string& reason) {
  if (aborted) {
    return;
  }
  aborted = true;
  abortReason = reason;
  for (Client* c : byRank) {
    if (c != nullptr) {
      send(*c, RendezvousFrame::kAbort, abortReason);
    }
  }
}

void RendezvousServer::Serving::refuse(Client& c, const std::string& why) {
  server.refused_.fetch_add(1, std::memory_order_relaxed);
  RES_WARN(NCCL_INIT, "rendezvous: refusing a connection%s: %s",
           c.rank >= 0 ? (" of rank " + std::to_string(c.rank)).c_str() : "", why.c_str());
  c.dead = true;
}

// The first frame of a connection: registers its rank if the HELLO is valid.
void RendezvousServer::Serving::hello(Client& c, const RendezvousHeader& h) {
  if (h.type != RendezvousFrame::kHello) {
    refuse(c, "first frame is not HELLO");
  } else if (h.token != server.token_) {
    refuse(c, "wrong job token");
  } else if (h.worldSize != server.worldSize_) {
    refuse(c, "world size " + std::to_string(h.worldSize) + ", this job has " +
                  std::to_string(server.worldSize_));
  } else if (byRank[h.rank] != nullptr) {
    refuse(c, "rank " + std::to_string(h.rank) + " is already registered");
  } else {
    c.rank = static_cast<int>(h.rank);
    byRank[h.rank] = &c;
    if (aborted) {
      send(c, RendezvousFrame::kAbort, abortReason);
    }
  }
}

// A rank's contribution to the round; the last one sends everybody the REPLY.
void RendezvousServer::Serving::gather(Client& c, const RendezvousHeader& h,
                                       std::string_view payload) {
  if (aborted) {
    send(c, RendezvousFrame::kAbort, abortReason);
  } else if (h.round != round || have[h.rank]) {
    refuse(c, "round " + std::to_string(h.round) + " out of order (serving round " +
                  std::to_string(round) + ")");
  } else {
    parts[h.rank] = std::string(payload);
    have[h.rank] = true;
    if (++haveCount == server.worldSize_) {
      const std::string reply = encodeGathered(parts);
      for (Client* r : byRank) {
        if (r != nullptr) {
          send(*r, RendezvousFrame::kReply, reply);
        }
      }
      ++round;
      haveCount = 0;
      std::fill(have.begin(), have.end(), false);
    }
  }
}

// A frame from a connection; marks the connection dead when it must go.
void RendezvousServer::Serving::handle(Client& c, const RendezvousHeader& h,
                                       std::string_view payload) {
  if (c.rank < 0) {
    hello(c, h);
    return;
  }
  if (h.token != server.token_ || h.rank != static_cast<uint32_t>(c.rank) ||
      h.worldSize != server.worldSize_) {
    refuse(c, "token, rank or world size changed after HELLO");
    return;
  }
  switch (h.type) {
    case RendezvousFrame::kGather: gather(c, h, payload); return;
    case RendezvousFrame::kAbort:
      abortAll("rank " + std::to_string(c.rank) + " aborted: " + std::string(payload));
      return;
    case RendezvousFrame::kBye:
      byRank[h.rank] = nullptr;
      c.rank = -2;  // done; not a refusal
      c.dead = true;
      ++gone;
      return;
    default: refuse(c, "unexpected frame type"); return;
  }
}

// Takes every pending connection, up to kMaxPendingConnections without HELLO.
void RendezvousServer::Serving::acceptAll() {
  for (;;) {
    FileDescriptor fd = acceptConnection(server.listen_.get());
    if (!fd.valid()) {
      break;
    }
    size_t pending = 0;
    for (const auto& c : clients) {
      pending += c->rank == -1 ? 1 : 0;
    }
    if (pending >= kMaxPendingConnections) {
      server.refused_.fetch_add(1, std::memory_order_relaxed);
      continue;  // closed by FileDescriptor
    }
    (void)applySocketOptions(fd.get(), SocketOptions{});
    auto c = std::make_unique<Client>();
    c->fd = std::move(fd);
    c->sinceNs = monotonicNs();
    if (server.events_.add(c->fd.get(), EventLoop::kReadable, c.get()).ok()) {
      clients.push_back(std::move(c));
    }
  }
}

// Reads what a ready connection has and handles every whole frame in it.
void RendezvousServer::Serving::readFrom(Client& c) {
  char buffer[65536];
  bool closed = false;
  for (;;) {
    const ssize_t got = ::recv(c.fd.get(), buffer, sizeof(buffer), 0);
    if (got > 0) {
      c.in.append(buffer, static_cast<size_t>(got));
      if (c.in.size() > kRendezvousHeaderBytes + kRendezvousMaxPayload) {
        break;  // more than one frame's worth: parse what is there first
      }
      continue;
    }
    if (got < 0 && errno == EINTR) {
      continue;
    }
    closed = got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
    break;
  }
  // Not a rendezvous peer: no need to wait for a whole header to tell.
  if (c.in.size() >= 4 && c.in.size() < kRendezvousHeaderBytes &&
      getU32(reinterpret_cast<const uint8_t*>(c.in.data())) != kRendezvousMagic) {
    refuse(c, "bad magic (not a rendezvous peer)");
  }
  size_t at = 0;
  while (!c.dead && c.in.size() - at >= kRendezvousHeaderBytes) {
    RendezvousHeader h;
    const Status s = decodeRendezvousHeader(reinterpret_cast<const uint8_t*>(c.in.data() + at), &h);
    if (!s.ok()) {
      refuse(c, s.message());
      break;
    }
    if (c.in.size() - at - kRendezvousHeaderBytes < h.length) {
      break;
    }
    handle(c, h, std::string_view(c.in).substr(at + kRendezvousHeaderBytes, h.length));
    at += kRendezvousHeaderBytes + h.length;
  }
  c.in.erase(0, at);
  if (closed && !c.dead) {
    c.dead = true;
  }
}

// Sweep: connections that never said HELLO, and ranks that left without BYE.
void RendezvousServer::Serving::sweep() {
  const uint64_t now = monotonicNs();
  for (auto& c : clients) {
    if (c->rank == -1 && !c->dead && now - c->sinceNs > kHelloTimeoutNs) {
      refuse(*c, "no HELLO within 10 s");
    }
  }
  for (auto it = clients.begin(); it != clients.end();) {
    Client& c = **it;
    if (!c.dead) {
      ++it;
      continue;
    }
    if (c.rank >= 0) {
      byRank[static_cast<size_t>(c.rank)] = nullptr;
      ++gone;
      abortAll("rank " + std::to_string(c.rank) + " left the rendezvous without BYE");
    }
    it = clients.erase(it);
  }
}

void RendezvousServer::serve() noexcept {
  Serving serving(*this);
  std::vector<Client*> ready;
  for (;;) {
    bool listenerReady = false;
    ready.clear();
    const Result<int> n = events_.wait(200, [&](void* tag, uint32_t /*events*/) {
      if (tag == &listen_) {
        listenerReady = true;
      } else {
        ready.push_back(static_cast<Client*>(tag));
      }
    });
    if (!n.ok()) {
      RES_WARN(NCCL_INIT, "rendezvous: %s; server stops", n.status().toString().c_str());
      return;
    }
    if (stopping_.load()) {
      return;
    }
    if (listenerReady) {
      serving.acceptAll();
    }
    for (Client* c : ready) {
      if (!c->dead) {
        serving.readFrom(*c);
      }
    }
    serving.sweep();
    if (serving.gone >= worldSize_) {
      return;
    }
  }
}

// ---------------------------------------------------------------------------
// Client

RendezvousClient::RendezvousClient(FileDescriptor fd, const RendezvousClientOptions& options)
    : fd_(std::move(fd)),
      rank_(options.rank),
      worldSize_(options.worldSize),
      token_(options.token),
      timeoutMs_(options.timeoutMs) {}

Result<std::unique_ptr<RendezvousClient>> RendezvousClient::connect(
    const SocketAddress& server, const RendezvousClientOptions& options) {
  if (options.worldSize == 0 || options.worldSize > kRendezvousMaxWorld ||
      options.rank >= options.worldSize) {
    return invalidUsage("rendezvous: rank " + std::to_string(options.rank) + " of world size " +
                        std::to_string(options.worldSize) + " is out of range");
  }
  const uint64_t deadline = monotonicNs() + static_cast<uint64_t>(options.timeoutMs) * 1000000ull;
  Result<FileDescriptor> fd = invalidUsage("not connected");
  if (options.serverSocket == ServerSocket::kOpenedByLauncher) {
    FileDescriptor connected;
    const int err = connectBefore(server, deadline, &connected);
    if (err == 0) {
      fd = std::move(connected);
    } else if (err == ECONNREFUSED) {
      fd = remoteError(
          "refused: its socket was open since the launch, so rank 0, which serves it, has exited",
          server.toString());
    } else {
      fd = connectionError(err, "connect", server.toString());
    }
  } else {
    fd = connectWithRetry(server, deadline);
  }
  if (!fd.ok()) {
    return Status::error(fd.status().kind(),
                         "rendezvous server " + server.toString() + ": " + fd.status().message(),
                         fd.status().sysErrno());
  }
  (void)applySocketOptions(fd->get(), SocketOptions{});
  std::unique_ptr<RendezvousClient> client(new RendezvousClient(std::move(fd).value(), options));
  RESILIENT_TRY(client->sendFrame(RendezvousFrame::kHello, {}, deadline));
  return client;
}

Status RendezvousClient::sendFrame(RendezvousFrame type, std::string_view payload,
                                   uint64_t deadlineNs) {
  RendezvousHeader h;
  h.type = type;
  h.token = token_;
  h.rank = rank_;
  h.worldSize = worldSize_;
  h.round = round_;
  h.length = static_cast<uint32_t>(payload.size());
  const std::string frame = frameBytes(h, payload);
  return sendAll(fd_.get(), frame.data(), frame.size(), deadlineNs, "a rendezvous frame");
}

Result<std::vector<std::string>> RendezvousClient::allGather(std::string_view mine) {
  if (!failed_.ok()) {
    return failed_;
  }
  if (mine.size() > kRendezvousMaxPayload) {
    return invalidUsage("rendezvous: contribution of " + std::to_string(mine.size()) +
                        " bytes exceeds " + std::to_string(kRendezvousMaxPayload));
  }
  const uint64_t deadline = monotonicNs() + static_cast<uint64_t>(timeoutMs_) * 1000000ull;
  Status s = sendFrame(RendezvousFrame::kGather, mine, deadline);
  uint8_t bytes[kRendezvousHeaderBytes];
  RendezvousHeader h;
  if (s.ok()) {
    s = recvAll(fd_.get(), bytes, sizeof(bytes), deadline, "a rendezvous reply");
  }
  if (s.ok()) {
    s = decodeRendezvousHeader(bytes, &h);
  }
  if (s.ok() && h.token != token_) {
    s = invalidUsage("rendezvous: reply with a wrong job token");
  }
  std::string payload;
  if (s.ok()) {
    payload.resize(h.length);
    s = recvAll(fd_.get(), payload.data(), payload.size(), deadline, "a rendezvous reply");
  }
  if (s.ok() && h.type == RendezvousFrame::kAbort) {
    failed_ = remoteError("rendezvous aborted: " + payload);
    return failed_;
  }
  if (s.ok() && (h.type != RendezvousFrame::kReply || h.round != round_)) {
    s = invalidUsage("rendezvous: unexpected reply (type " +
                     std::to_string(static_cast<int>(h.type)) + ", round " +
                     std::to_string(h.round) + ", expected " + std::to_string(round_) + ")");
  }
  if (!s.ok()) {
    failed_ = Status::error(
        s.kind(), "rendezvous round " + std::to_string(round_) + ": " + s.message(), s.sysErrno());
    return failed_;
  }
  Result<std::vector<std::string>> parts = decodeGathered(payload, worldSize_);
  if (!parts.ok()) {
    failed_ = parts.status();
    return failed_;
  }
  ++round_;
  return parts;
}

void RendezvousClient::abort(std::string_view reason) noexcept {
  if (!failed_.ok() || !fd_.valid()) {
    return;
  }
  const std::string_view text = reason.substr(0, kRendezvousMaxAbortText);
  (void)sendFrame(RendezvousFrame::kAbort, text, monotonicNs() + 200000000ull);
  failed_ = remoteError("this rank aborted the rendezvous: " + std::string(text));
}

Status RendezvousClient::finish() {
  if (!failed_.ok()) {
    return failed_;
  }
  Status s = sendFrame(RendezvousFrame::kBye, {},
                       monotonicNs() + static_cast<uint64_t>(timeoutMs_) * 1000000ull);
  failed_ = invalidUsage("rendezvous: already finished");
  return s;
}

}  // namespace resilient::hostengine
