#include "tests/support/memory_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "plugin/transport/request_pool.h"

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

// One posted send, receive or flush; a slot of its comm's pool.
class MemoryTransport::MemoryRequest final : public transport::Request {
 public:
  struct Buffer {
    std::byte* data = nullptr;
    size_t capacity = 0;
    int tag = 0;
    int got = -1;  // bytes received, -1 while waiting
  };

  Status test(int* isDone, int* sizes) override;

  CommState* comm = nullptr;
  MemoryRequest* next = nullptr;  // in its connection's queue
  bool outstanding = false;       // handed out, not yet reported done
  bool done = false;
  bool flush = false;
  // send
  const std::byte* data = nullptr;
  size_t size = 0;
  int tag = 0;
  // receive (capacity for maxRecvs reserved when the comm is made)
  std::vector<Buffer> buffers;
};

namespace {

// A FIFO of requests linked through MemoryRequest::next (no allocation).
template <class R>
struct Queue {
  R* head = nullptr;
  R* tail = nullptr;

  bool empty() const { return head == nullptr; }
  void push(R* r) {
    r->next = nullptr;
    if (tail != nullptr) {
      tail->next = r;
    } else {
      head = r;
    }
    tail = r;
  }
  void pop() {
    head = head->next;
    if (head == nullptr) {
      tail = nullptr;
    }
  }
  void clear() { head = tail = nullptr; }
};

}  // namespace

// Both ends of one connection; owned by the transport, so that either end
// sees the other's close after the other's object is gone.
struct MemoryTransport::Connection {
  bool sendClosed = false;
  bool recvClosed = false;
  Status failed;               // set for good by a protocol error
  Queue<MemoryRequest> sends;  // posted, bytes not moved yet, in posting order
  Queue<MemoryRequest> recvs;  // posted, not complete, in posting order
  uint64_t bytes = 0;          // moved so far (both ends report it)
  transport::Endpoint client;  // the connecting side
  transport::Endpoint server;  // the listener's address
};

struct MemoryTransport::ListenPoint {
  uint64_t id = 0;
  std::string address;
  bool closed = false;
  std::deque<Connection*> backlog;  // connected, not yet accepted
};

// What send and receive comms share: their end of the connection and their requests.
struct MemoryTransport::CommState {
  CommState(MemoryTransport* t, Connection* c, bool send)
      : owner(t),
        conn(c),
        isSend(send),
        pool(static_cast<size_t>(send ? 2 * transport::kMaxRequests * t->maxRecvs_
                                      : 4 * transport::kMaxRequests)) {
    for (MemoryRequest& r : pool.slots()) {
      r.comm = this;
      if (!send) {
        r.buffers.reserve(static_cast<size_t>(t->maxRecvs_));
      }
    }
  }
  ~CommState() {
    if (!closed) {
      (void)close();
    }
  }
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  // A request from the pool, out and not done, with no buffers (nullptr:
  // every request is out).
  MemoryRequest* take() {
    MemoryRequest* r = pool.acquire();
    if (r != nullptr) {
      r->outstanding = true;
      r->done = false;
      r->flush = false;
      r->buffers.clear();
    }
    return r;
  }
  Status regMr(std::byte* data, size_t size, int type,
               std::unique_ptr<transport::MemoryRegion>* region);
  Status deregMr(std::unique_ptr<transport::MemoryRegion> region);
  Status close();
  bool bytesMoved(uint64_t* bytes) noexcept {
    const std::lock_guard<std::mutex> lock(owner->mutex_);
    *bytes = conn->bytes;
    return true;
  }
  bool endpoints(transport::Endpoint* l, transport::Endpoint* p) const noexcept {
    *l = local;
    *p = peer;
    return true;
  }

  MemoryTransport* owner;
  Connection* conn;
  const bool isSend;
  bool closed = false;
  int outstanding = 0;  // isend/irecv requests not yet reported done
  transport::Endpoint local;
  transport::Endpoint peer;
  transport::RequestPool<MemoryRequest> pool;
};

// A registration: nothing to register, only which comm made it.
class MemoryTransport::Region final : public transport::MemoryRegion {
 public:
  explicit Region(const CommState* c) : comm(c) {}
  const CommState* comm;
};

class MemoryTransport::MemorySendComm final
    : public transport::CommOver<transport::SendComm, CommState> {
 public:
  MemorySendComm(MemoryTransport* t, Connection* c) : CommOver(t, c, true) {}

  Status isend(std::byte* data, size_t size, int tag, transport::MemoryRegion* region,
               transport::ProfilerHandle* phandle, transport::Request** request) override;
};

class MemoryTransport::MemoryRecvComm final
    : public transport::CommOver<transport::RecvComm, CommState> {
 public:
  MemoryRecvComm(MemoryTransport* t, Connection* c) : CommOver(t, c, false) {}

  Status irecv(int n, std::byte** data, const size_t* sizes, const int* tags,
               transport::MemoryRegion** regions, transport::ProfilerHandle** phandles,
               transport::Request** request) override;
  Status iflush(int n, std::byte** data, const int* sizes, transport::MemoryRegion** regions,
                transport::Request** request) override;
};

class MemoryTransport::MemoryListener final : public transport::Listener {
 public:
  MemoryListener(MemoryTransport* t, ListenPoint* p) : owner(t), point(p) {}
  ~MemoryListener() override {
    if (!closed) {
      (void)close();
    }
  }
  MemoryListener(const MemoryListener&) = delete;
  MemoryListener& operator=(const MemoryListener&) = delete;

  Status accept(transport::DeviceHandleRequest wantDeviceHandle,
                std::unique_ptr<transport::RecvComm>* comm) override;
  Status close() override {
    const std::lock_guard<std::mutex> lock(owner->mutex_);
    point->closed = true;
    closed = true;
    return {};
  }

  MemoryTransport* owner;
  ListenPoint* point;
  bool closed = false;
};

Status MemoryTransport::MemoryRequest::test(int* isDone, int* sizes) {
  return comm->owner->test(*this, isDone, sizes);
}

MemoryTransport::MemoryTransport(int maxRecvs, bool forceFlush)
    : maxRecvs_(maxRecvs), forceFlush_(forceFlush) {}

MemoryTransport::~MemoryTransport() = default;

void MemoryTransport::setNextListenAddress(std::string address) {
  const std::lock_guard<std::mutex> lock(mutex_);
  nextListenAddress_ = std::move(address);
}

bool MemoryTransport::made(const transport::Comm& comm) const noexcept {
  if (const auto* s = dynamic_cast<const MemorySendComm*>(&comm)) {
    return s->state.owner == this;
  }
  if (const auto* r = dynamic_cast<const MemoryRecvComm*>(&comm)) {
    return r->state.owner == this;
  }
  return false;
}

Status MemoryTransport::initContext(uint64_t /*commId*/, const transport::CommConfig& /*config*/,
                                    std::unique_ptr<transport::Context>* ctx) {
  ctx->reset();
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

Status MemoryTransport::listen(transport::Context* /*ctx*/, int /*dev*/, std::byte* handle,
                               std::unique_ptr<transport::Listener>* listener) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto l = std::make_unique<ListenPoint>();
  l->id = listens_.size() + 1;
  l->address = nextListenAddress_;
  std::memcpy(handle, &kMagic, sizeof kMagic);
  std::memcpy(handle + sizeof kMagic, &l->id, sizeof l->id);
  *listener = std::make_unique<MemoryListener>(this, l.get());
  listens_.push_back(std::move(l));
  return {};
}

Status MemoryTransport::connect(transport::Context* /*ctx*/, int /*dev*/, std::byte* handle,
                                transport::DeviceHandleRequest /*wantDeviceHandle*/,
                                std::unique_ptr<transport::SendComm>* comm) {
  uint64_t magic = 0;
  uint64_t id = 0;
  std::memcpy(&magic, handle, sizeof magic);
  std::memcpy(&id, handle + sizeof magic, sizeof id);
  if (magic != kMagic) {
    return invalidUsage("memory: not a handle of this transport");
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (id == 0 || id > listens_.size() || listens_[id - 1]->closed) {
    return remoteError("memory: connection refused");
  }
  ListenPoint& l = *listens_[id - 1];
  auto conn = std::make_unique<Connection>();
  setText(&conn->client, "10.0.0.1:" + std::to_string(50000 + ++connectionCount_));
  setText(&conn->server, l.address);
  auto send = std::make_unique<MemorySendComm>(this, conn.get());
  send->state.local = conn->client;
  send->state.peer = conn->server;
  l.backlog.push_back(conn.get());
  connections_.push_back(std::move(conn));
  *comm = std::move(send);
  ++liveComms;
  return {};
}

Status MemoryTransport::MemoryListener::accept(transport::DeviceHandleRequest /*wantDeviceHandle*/,
                                               std::unique_ptr<transport::RecvComm>* comm) {
  comm->reset();
  const std::lock_guard<std::mutex> lock(owner->mutex_);
  if (point->backlog.empty()) {
    return {};
  }
  Connection* conn = point->backlog.front();
  point->backlog.pop_front();
  auto recv = std::make_unique<MemoryRecvComm>(owner, conn);
  recv->state.local = conn->server;
  recv->state.peer = conn->client;
  *comm = std::move(recv);
  ++owner->liveComms;
  return {};
}

// Nothing to register: the bytes are copied from and to the caller's buffers.
Status MemoryTransport::CommState::regMr(std::byte* /*data*/, size_t /*size*/, int type,
                                         std::unique_ptr<transport::MemoryRegion>* region) {
  const std::lock_guard<std::mutex> lock(owner->mutex_);
  if (closed) {
    return internalError("memory: regMr on a closed comm");
  }
  if (type != transport::kPtrHost) {
    return invalidUsage("memory: host memory only");
  }
  *region = std::make_unique<Region>(this);
  return {};
}

Status MemoryTransport::CommState::deregMr(std::unique_ptr<transport::MemoryRegion> region) {
  const std::lock_guard<std::mutex> lock(owner->mutex_);
  if (closed) {
    return internalError("memory: deregMr on a closed comm");
  }
  // A test double checks what it is given: a region of another comm or
  // transport is the caller's bug.
  const auto* mine = dynamic_cast<const Region*>(region.get());
  if (mine == nullptr || mine->comm != this) {
    return invalidUsage("memory: not a memory region of this comm");
  }
  return {};
}

Status MemoryTransport::CommState::close() {
  const std::lock_guard<std::mutex> lock(owner->mutex_);
  ++owner->closeCalls;
  if (closed) {
    return internalError("memory: comm closed twice");
  }
  closed = true;
  --owner->liveComms;
  // The pool goes with this object: the connection keeps no request of it.
  if (isSend) {
    conn->sendClosed = true;
    conn->sends.clear();
  } else {
    conn->recvClosed = true;
    conn->recvs.clear();
  }
  return {};
}

Status MemoryTransport::MemorySendComm::isend(std::byte* data, size_t size, int tag,
                                              transport::MemoryRegion* /*region*/,
                                              transport::ProfilerHandle* /*phandle*/,
                                              transport::Request** request) {
  MemoryTransport& t = *state.owner;
  *request = nullptr;
  const std::lock_guard<std::mutex> lock(t.mutex_);
  ++t.isendCalls;
  if (state.closed) {
    return internalError("memory: isend on a closed comm");
  }
  Connection& conn = *state.conn;
  if (!conn.failed.ok()) {
    return conn.failed;
  }
  if (conn.recvClosed && t.closeSeen()) {
    return remoteError("memory: peer closed the connection (EOF)", state.peer.text);
  }
  MemoryRequest* r = state.take();
  if (r == nullptr) {
    return {};  // every request is out: retry
  }
  r->data = data;
  r->size = size;
  r->tag = tag;
  conn.sends.push(r);
  raiseToAtLeast(t.maxSendOutstanding, ++state.outstanding);
  *request = r;
  return {};
}

Status MemoryTransport::MemoryRecvComm::irecv(int n, std::byte** data, const size_t* sizes,
                                              const int* tags,
                                              transport::MemoryRegion** /*regions*/,
                                              transport::ProfilerHandle** /*phandles*/,
                                              transport::Request** request) {
  MemoryTransport& t = *state.owner;
  *request = nullptr;
  const std::lock_guard<std::mutex> lock(t.mutex_);
  ++t.irecvCalls;
  if (state.closed) {
    return internalError("memory: irecv on a closed comm");
  }
  if (n < 1 || n > t.maxRecvs_) {
    return invalidUsage("memory: n outside 1..maxRecvs");
  }
  Connection& conn = *state.conn;
  if (!conn.failed.ok()) {
    return conn.failed;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      if (tags[j] == tags[i]) {
        return invalidUsage("memory: duplicate tags in a grouped receive");
      }
    }
  }
  MemoryRequest* r = state.take();
  if (r == nullptr) {
    return {};  // every request is out: retry
  }
  for (int i = 0; i < n; ++i) {
    r->buffers.push_back({data[i], sizes[i], tags[i], -1});
  }
  if (n > 1) {
    ++t.groupedRecvs;
  }
  conn.recvs.push(r);
  raiseToAtLeast(t.maxRecvOutstanding, ++state.outstanding);
  *request = r;
  return {};
}

Status MemoryTransport::MemoryRecvComm::iflush(int /*n*/, std::byte** /*data*/,
                                               const int* /*sizes*/,
                                               transport::MemoryRegion** /*regions*/,
                                               transport::Request** request) {
  MemoryTransport& t = *state.owner;
  *request = nullptr;
  const std::lock_guard<std::mutex> lock(t.mutex_);
  ++t.flushes;
  MemoryRequest* r = state.take();
  if (r == nullptr) {
    // A null flush request means "nothing to wait for": never answer that for want of a slot.
    return internalError("memory: request pool exhausted on iflush");
  }
  r->flush = true;
  r->done = true;
  *request = r;
  return {};
}

Status MemoryTransport::pushSend(MemoryRequest& send) {
  Connection& conn = *send.comm->conn;
  if (conn.recvs.empty()) {
    return {};
  }
  MemoryRequest& recv = *conn.recvs.head;
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
  conn.bytes += send.size;
  conn.sends.pop();
  if (std::all_of(recv.buffers.begin(), recv.buffers.end(),
                  [](const auto& b) { return b.got >= 0; })) {
    recv.done = true;
    conn.recvs.pop();
  }
  return {};
}

Status MemoryTransport::test(MemoryRequest& r, int* done, int* sizes) {
  *done = 0;
  const int64_t calls = ++testCalls;
  const int64_t failAfter = failAfter_.load();
  if (failAfter >= 0 && calls > failAfter) {
    return remoteError("memory: injected failure", "10.0.0.9:1234");
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!r.outstanding) {
    return internalError("memory: test of a request that is not outstanding (reported done?)");
  }
  CommState& c = *r.comm;
  if (c.closed) {
    return internalError("memory: test on a closed comm");
  }
  Connection& conn = *c.conn;
  if (!conn.failed.ok()) {
    return conn.failed;
  }
  if (c.isSend && !r.done) {
    if (conn.recvClosed && closeSeen()) {
      return remoteError("memory: peer closed the connection (EOF)", c.peer.text);
    }
    // Sender-driven progress, in posting order up to this request.
    while (!r.done && !conn.sends.empty() && !stalled_.load()) {
      MemoryRequest& oldest = *conn.sends.head;
      RESILIENT_TRY(pushSend(oldest));
      if (!oldest.done) {
        break;
      }
    }
  }
  if (!c.isSend && !r.done && conn.sendClosed && closeSeen()) {
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
  r.outstanding = false;
  c.pool.release(&r);
  return {};
}

bool MemoryTransport::closeSeen() const {
  const int64_t failAfter = failAfter_.load();
  return !stalled_.load() && (failAfter < 0 || testCalls.load() <= failAfter);
}

}  // namespace resilient::test
