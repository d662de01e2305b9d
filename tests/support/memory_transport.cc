#include "tests/support/memory_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace resilient::test {

namespace {

// The handle: this magic, then the listener's id (both u64).
constexpr uint64_t kMagic = 0x4d454d5452414e53ull;

void setText(transport::Endpoint* e, const std::string& text) {
  std::snprintf(e->text, sizeof e->text, "%s", text.c_str());
}

void raiseToAtLeast(std::atomic<int>& most, int value) {
  int seen = most.load();
  while (value > seen && !most.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

struct MemoryTransport::MemoryConnection {
  Comm* send = nullptr;
  Comm* recv = nullptr;
  Status failed;                     // set for good by a protocol error
  std::deque<MemoryRequest*> sends;  // posted, bytes not moved yet, in posting order
  std::deque<MemoryRequest*> recvs;  // posted, not complete, in posting order
};

struct MemoryTransport::Comm {
  MemoryConnection* conn = nullptr;
  bool isSend = true;
  bool closed = false;
  int outstanding = 0;  // isend/irecv requests not yet reported done
  uint64_t bytes = 0;
  transport::Endpoint local;
  transport::Endpoint peer;
};

struct MemoryTransport::MemoryRequest {
  struct Buffer {
    char* data = nullptr;
    size_t capacity = 0;
    int tag = 0;
    int got = -1;  // bytes received, -1 while waiting
  };
  Comm* comm = nullptr;
  bool done = false;
  bool flush = false;
  // send
  const char* data = nullptr;
  size_t size = 0;
  int tag = 0;
  // receive
  std::vector<Buffer> buffers;
};

struct MemoryTransport::Listen {
  uint64_t id = 0;
  std::string address;
  bool closed = false;
  std::deque<Comm*> backlog;  // receive comms connected, not yet accepted
};

MemoryTransport::MemoryTransport(int maxRecvs, bool forceFlush)
    : maxRecvs_(maxRecvs), forceFlush_(forceFlush) {}

MemoryTransport::~MemoryTransport() = default;

void MemoryTransport::setNextListenAddress(std::string address) {
  const std::lock_guard<std::mutex> lock(mutex_);
  nextListenAddress_ = std::move(address);
}

bool MemoryTransport::isComm(const void* comm) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return std::any_of(comms_.begin(), comms_.end(),
                     [comm](const auto& c) { return c.get() == comm; });
}

Status MemoryTransport::initContext(uint64_t /*commId*/, const transport::CommConfig& /*config*/,
                                    void** ctx) {
  *ctx = nullptr;
  return {};
}

Status MemoryTransport::finalizeContext(void* /*ctx*/) {
  return {};
}

Status MemoryTransport::devices(int* ndev) {
  *ndev = 1;
  return {};
}

Status MemoryTransport::properties(int dev, transport::Properties* props) {
  if (dev != 0) {
    return invalidUsage("memory: no device " + std::to_string(dev));
  }
  *props = transport::Properties{};
  props->name = "memory";
  props->maxRecvs = maxRecvs_;
  props->forceFlush = forceFlush_ ? 1 : 0;
  props->maxP2pBytes = size_t{1} << 30;
  return {};
}

Status MemoryTransport::listen(void* /*ctx*/, int /*dev*/, void* handle, void** listenComm) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto l = std::make_unique<Listen>();
  l->id = listens_.size() + 1;
  l->address = nextListenAddress_;
  std::memcpy(handle, &kMagic, sizeof kMagic);
  std::memcpy(static_cast<char*>(handle) + sizeof kMagic, &l->id, sizeof l->id);
  *listenComm = l.get();
  listens_.push_back(std::move(l));
  return {};
}

Status MemoryTransport::connect(void* /*ctx*/, int /*dev*/, void* handle, void** sendComm) {
  uint64_t magic = 0;
  uint64_t id = 0;
  std::memcpy(&magic, handle, sizeof magic);
  std::memcpy(&id, static_cast<const char*>(handle) + sizeof magic, sizeof id);
  if (magic != kMagic) {
    return invalidUsage("memory: not a handle of this transport");
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (id == 0 || id > listens_.size() || listens_[id - 1]->closed) {
    return remoteError("memory: connection refused");
  }
  Listen& l = *listens_[id - 1];
  auto conn = std::make_unique<MemoryConnection>();
  auto send = std::make_unique<Comm>();
  auto recv = std::make_unique<Comm>();
  const std::string client = "10.0.0.1:" + std::to_string(50000 + ++connectionCount_);
  send->conn = recv->conn = conn.get();
  send->isSend = true;
  recv->isSend = false;
  setText(&send->local, client);
  setText(&send->peer, l.address);
  setText(&recv->local, l.address);
  setText(&recv->peer, client);
  conn->send = send.get();
  conn->recv = recv.get();
  l.backlog.push_back(recv.get());
  *sendComm = send.get();
  comms_.push_back(std::move(send));
  comms_.push_back(std::move(recv));
  connections_.push_back(std::move(conn));
  ++liveComms;
  return {};
}

Status MemoryTransport::accept(void* listenComm, void** recvComm) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto* l = static_cast<Listen*>(listenComm);
  *recvComm = nullptr;
  if (!l->backlog.empty()) {
    *recvComm = l->backlog.front();
    l->backlog.pop_front();
    ++liveComms;
  }
  return {};
}

Status MemoryTransport::regMr(void* comm, void* /*data*/, size_t /*size*/, int type,
                              void** mhandle) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<Comm*>(comm)->closed) {
    return internalError("memory: regMr on a closed comm");
  }
  if (type != transport::kPtrHost) {
    return invalidUsage("memory: host memory only");
  }
  *mhandle = comm;
  return {};
}

Status MemoryTransport::deregMr(void* comm, void* mhandle) {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<Comm*>(comm)->closed) {
    return internalError("memory: deregMr on a closed comm");
  }
  if (mhandle != comm) {
    return invalidUsage("memory: not a memory handle of this comm");
  }
  return {};
}

MemoryTransport::MemoryRequest* MemoryTransport::track(std::unique_ptr<MemoryRequest> request) {
  MemoryRequest* r = request.get();
  requests_.emplace(r, std::move(request));
  return r;
}

Status MemoryTransport::isend(void* sendComm, void* data, size_t size, int tag, void* /*mhandle*/,
                              void* /*phandle*/, void** request) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++isendCalls;
  auto* c = static_cast<Comm*>(sendComm);
  if (c->closed) {
    return internalError("memory: isend on a closed comm");
  }
  if (!c->conn->failed.ok()) {
    return c->conn->failed;
  }
  if (c->conn->recv->closed && closeSeen()) {
    return remoteError("memory: peer closed the connection (EOF)", c->peer.text);
  }
  auto r = std::make_unique<MemoryRequest>();
  r->comm = c;
  r->data = static_cast<const char*>(data);
  r->size = size;
  r->tag = tag;
  c->conn->sends.push_back(r.get());
  raiseToAtLeast(maxSendOutstanding, ++c->outstanding);
  *request = track(std::move(r));
  return {};
}

Status MemoryTransport::irecv(void* recvComm, int n, void** data, const size_t* sizes,
                              const int* tags, void** /*mhandles*/, void** /*phandles*/,
                              void** request) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++irecvCalls;
  auto* c = static_cast<Comm*>(recvComm);
  if (c->closed) {
    return internalError("memory: irecv on a closed comm");
  }
  if (n < 1 || n > maxRecvs_) {
    return invalidUsage("memory: n outside 1..maxRecvs");
  }
  if (!c->conn->failed.ok()) {
    return c->conn->failed;
  }
  auto r = std::make_unique<MemoryRequest>();
  r->comm = c;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      if (tags[j] == tags[i]) {
        return invalidUsage("memory: duplicate tags in a grouped receive");
      }
    }
    r->buffers.push_back({static_cast<char*>(data[i]), sizes[i], tags[i], -1});
  }
  if (n > 1) {
    ++groupedRecvs;
  }
  c->conn->recvs.push_back(r.get());
  raiseToAtLeast(maxRecvOutstanding, ++c->outstanding);
  *request = track(std::move(r));
  return {};
}

Status MemoryTransport::iflush(void* recvComm, int /*n*/, void** /*data*/, const int* /*sizes*/,
                               void** /*mhandles*/, void** request) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++flushes;
  auto r = std::make_unique<MemoryRequest>();
  r->comm = static_cast<Comm*>(recvComm);
  r->flush = true;
  r->done = true;
  *request = track(std::move(r));
  return {};
}

Status MemoryTransport::pushSend(MemoryRequest& send) {
  MemoryConnection& conn = *send.comm->conn;
  if (conn.recvs.empty()) {
    return {};
  }
  MemoryRequest& recv = *conn.recvs.front();
  const auto slot = std::find_if(recv.buffers.begin(), recv.buffers.end(),
                                 [&](const auto& b) { return b.got < 0 && b.tag == send.tag; });
  if (slot == recv.buffers.end()) {
    conn.failed = remoteError("memory: a message with tag " + std::to_string(send.tag) +
                              " matches no free buffer");
    return conn.failed;
  }
  if (send.size > slot->capacity) {
    conn.failed =
        remoteError("memory: a message of " + std::to_string(send.size) +
                    " bytes is larger than its buffer (" + std::to_string(slot->capacity) + ")");
    return conn.failed;
  }
  if (send.size > 0) {
    std::memcpy(slot->data, send.data, send.size);
  }
  slot->got = static_cast<int>(send.size);
  send.done = true;
  conn.send->bytes += send.size;
  conn.recv->bytes += send.size;
  conn.sends.pop_front();
  if (std::all_of(recv.buffers.begin(), recv.buffers.end(),
                  [](const auto& b) { return b.got >= 0; })) {
    recv.done = true;
    conn.recvs.pop_front();
  }
  return {};
}

Status MemoryTransport::test(void* request, int* done, int* sizes) {
  *done = 0;
  const int64_t calls = ++testCalls;
  const int64_t failAfter = failAfter_.load();
  if (failAfter >= 0 && calls > failAfter) {
    return remoteError("memory: injected failure", "10.0.0.9:1234");
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto found = requests_.find(request);
  if (found == requests_.end()) {
    return internalError("memory: test of a request that is not outstanding (reported done?)");
  }
  MemoryRequest& r = *found->second;
  Comm& c = *r.comm;
  if (c.closed) {
    return internalError("memory: test on a closed comm");
  }
  MemoryConnection& conn = *c.conn;
  if (!conn.failed.ok()) {
    return conn.failed;
  }
  if (c.isSend && !r.done) {
    if (conn.recv->closed && closeSeen()) {
      return remoteError("memory: peer closed the connection (EOF)", c.peer.text);
    }
    // Sender-driven progress, in posting order up to this request.
    while (!r.done && !conn.sends.empty() && !stalled_.load()) {
      MemoryRequest& oldest = *conn.sends.front();
      RESILIENT_TRY(pushSend(oldest));
      if (!oldest.done) {
        break;
      }
    }
  }
  if (!c.isSend && !r.done && conn.send->closed && closeSeen()) {
    return remoteError("memory: peer closed the connection (EOF)", c.peer.text);
  }
  if (!r.done) {
    return {};
  }
  *done = 1;
  if (sizes != nullptr && reportSizes_.load()) {
    if (c.isSend) {
      sizes[0] = static_cast<int>(r.size);
    } else {
      for (size_t i = 0; i < r.buffers.size(); ++i) {
        sizes[i] = r.buffers[i].got;
      }
    }
  }
  if (!r.flush) {
    --c.outstanding;
  }
  requests_.erase(found);
  return {};
}

bool MemoryTransport::closeSeen() const {
  const int64_t failAfter = failAfter_.load();
  return !stalled_.load() && (failAfter < 0 || testCalls.load() <= failAfter);
}

Status MemoryTransport::closeComm(void* comm, bool isSend) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++closeCalls;
  auto* c = static_cast<Comm*>(comm);
  if (c->isSend != isSend) {
    return internalError("memory: close of the wrong direction");
  }
  if (c->closed) {
    ++doubleCloses;
    return internalError("memory: comm closed twice");
  }
  c->closed = true;
  --liveComms;
  return {};
}

Status MemoryTransport::closeSend(void* sendComm) {
  return closeComm(sendComm, true);
}

Status MemoryTransport::closeRecv(void* recvComm) {
  return closeComm(recvComm, false);
}

Status MemoryTransport::closeListen(void* listenComm) {
  const std::lock_guard<std::mutex> lock(mutex_);
  static_cast<Listen*>(listenComm)->closed = true;
  return {};
}

bool MemoryTransport::bytesMoved(void* comm, uint64_t* bytes) noexcept {
  const std::lock_guard<std::mutex> lock(mutex_);
  *bytes = static_cast<Comm*>(comm)->bytes;
  return true;
}

bool MemoryTransport::endpoints(void* comm, transport::Endpoint* local,
                                transport::Endpoint* peer) noexcept {
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto* c = static_cast<Comm*>(comm);
  *local = c->local;
  *peer = c->peer;
  return true;
}

}  // namespace resilient::test
