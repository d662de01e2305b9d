#include "tests/unit/transport/fault/loopback_transport.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace resilient::test {

namespace {
constexpr int kMaxSubs = 64;

void setText(transport::Endpoint* e, const std::string& text) {
  std::snprintf(e->text, sizeof e->text, "%s", text.c_str());
}
}  // namespace

struct LoopbackTransport::LoopbackConnection {
  FakeComm* send = nullptr;
  FakeComm* recv = nullptr;
  std::deque<FakeRequest*> sends;  // posted, bytes not moved yet, in posting order
  std::deque<FakeRequest*> recvs;  // posted, not complete, in posting order
};

struct LoopbackTransport::FakeComm {
  LoopbackConnection* conn = nullptr;
  bool isSend = true;
  bool closed = false;
  uint64_t bytes = 0;
  transport::Endpoint local;
  transport::Endpoint peer;
};

struct LoopbackTransport::FakeRequest {
  FakeComm* comm = nullptr;
  bool done = false;
  bool reported = false;
  // send
  void* data = nullptr;
  size_t size = 0;
  int tag = 0;
  // receive (n subs) or flush (n == 0)
  int n = 0;
  void* subData[kMaxSubs] = {};
  size_t subCapacity[kMaxSubs] = {};
  int subTag[kMaxSubs] = {};
  int subGot[kMaxSubs] = {};  // bytes received, -1 while waiting
};

struct LoopbackTransport::FakeListen {
  uint64_t id = 0;
  std::string address;
  bool closed = false;
  std::deque<FakeComm*> backlog;
};

LoopbackTransport::LoopbackTransport(int maxRecvs) : maxRecvs_(maxRecvs) {}
LoopbackTransport::~LoopbackTransport() = default;

bool LoopbackTransport::isComm(const void* comm) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::any_of(comms_.begin(), comms_.end(),
                     [comm](const auto& c) { return c.get() == comm; });
}

bool LoopbackTransport::isClosed(const void* comm) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& c : comms_) {
    if (c.get() == comm) {
      return c->closed;
    }
  }
  return false;
}

Status LoopbackTransport::initContext(uint64_t /*commId*/, const transport::CommConfig& /*config*/,
                                      void** ctx) {
  *ctx = nullptr;
  return {};
}
Status LoopbackTransport::finalizeContext(void* /*ctx*/) {
  return {};
}
Status LoopbackTransport::devices(int* ndev) {
  *ndev = 1;
  return {};
}
Status LoopbackTransport::properties(int dev, transport::Properties* props) {
  if (dev != 0) {
    return invalidUsage("loopback: no device " + std::to_string(dev));
  }
  *props = transport::Properties{};
  props->name = "loopback";
  props->maxRecvs = maxRecvs_;
  return {};
}

Status LoopbackTransport::listen(void* /*ctx*/, int /*dev*/, void* handle, void** listenComm) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto l = std::make_unique<FakeListen>();
  l->id = listens_.size() + 1;
  l->address = nextListenAddress_;
  std::memcpy(handle, &l->id, sizeof l->id);
  *listenComm = l.get();
  listens_.push_back(std::move(l));
  return {};
}

Status LoopbackTransport::connect(void* /*ctx*/, int /*dev*/, void* handle, void** sendComm) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t id = 0;
  std::memcpy(&id, handle, sizeof id);
  if (id == 0 || id > listens_.size() || listens_[id - 1]->closed) {
    return remoteError("loopback: connection refused");
  }
  FakeListen& l = *listens_[id - 1];
  auto conn = std::make_unique<LoopbackConnection>();
  auto send = std::make_unique<FakeComm>();
  auto recv = std::make_unique<FakeComm>();
  const std::string client = "10.0.0.1:" + std::to_string(50000 + ++connections_);
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
  connectionStore_.push_back(std::move(conn));
  return {};
}

Status LoopbackTransport::accept(void* listenComm, void** recvComm) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto* l = static_cast<FakeListen*>(listenComm);
  *recvComm = nullptr;
  if (!l->backlog.empty()) {
    *recvComm = l->backlog.front();
    l->backlog.pop_front();
  }
  return {};
}

Status LoopbackTransport::regMr(void* comm, void* /*data*/, size_t /*size*/, int /*type*/,
                                void** mhandle) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<FakeComm*>(comm)->closed) {
    return internalError("loopback: regMr on a closed comm");
  }
  *mhandle = comm;
  return {};
}

Status LoopbackTransport::deregMr(void* comm, void* /*mhandle*/) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (static_cast<FakeComm*>(comm)->closed) {
    return internalError("loopback: deregMr on a closed comm");
  }
  return {};
}

Status LoopbackTransport::isend(void* sendComm, void* data, size_t size, int tag, void* /*mhandle*/,
                                void* /*phandle*/, void** request) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++isendCalls;
  auto* c = static_cast<FakeComm*>(sendComm);
  if (c->closed) {
    return internalError("loopback: isend on a closed comm");
  }
  if (c->conn->recv->closed) {
    return remoteError("loopback: peer closed the connection (EOF)", c->peer.text);
  }
  auto r = std::make_unique<FakeRequest>();
  r->comm = c;
  r->data = data;
  r->size = size;
  r->tag = tag;
  c->conn->sends.push_back(r.get());
  *request = r.get();
  requests_.push_back(std::move(r));
  return {};
}

Status LoopbackTransport::irecv(void* recvComm, int n, void** data, const size_t* sizes,
                                const int* tags, void** /*mhandles*/, void** /*phandles*/,
                                void** request) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++irecvCalls;
  auto* c = static_cast<FakeComm*>(recvComm);
  if (c->closed) {
    return internalError("loopback: irecv on a closed comm");
  }
  if (n < 1 || n > maxRecvs_) {
    return internalError("loopback: irecv n out of range");
  }
  auto r = std::make_unique<FakeRequest>();
  r->comm = c;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->subData[i] = data[i];
    r->subCapacity[i] = sizes[i];
    r->subTag[i] = tags[i];
    r->subGot[i] = -1;
  }
  c->conn->recvs.push_back(r.get());
  *request = r.get();
  requests_.push_back(std::move(r));
  return {};
}

Status LoopbackTransport::iflush(void* recvComm, int /*n*/, void** /*data*/, const int* /*sizes*/,
                                 void** /*mhandles*/, void** request) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto r = std::make_unique<FakeRequest>();
  r->comm = static_cast<FakeComm*>(recvComm);
  r->done = true;
  *request = r.get();
  requests_.push_back(std::move(r));
  return {};
}

Status LoopbackTransport::pushSend(FakeRequest& send) {
  LoopbackConnection& conn = *send.comm->conn;
  if (conn.recvs.empty()) {
    return {};
  }
  FakeRequest& recv = *conn.recvs.front();
  for (int i = 0; i < recv.n; ++i) {
    if (recv.subGot[i] >= 0 || recv.subTag[i] != send.tag) {
      continue;
    }
    if (send.size > recv.subCapacity[i]) {
      return internalError("loopback: message truncated");
    }
    if (send.size > 0) {
      std::memcpy(recv.subData[i], send.data, send.size);
    }
    recv.subGot[i] = static_cast<int>(send.size);
    send.done = true;
    conn.send->bytes += send.size;
    conn.recv->bytes += send.size;
    conn.sends.pop_front();
    if (std::all_of(recv.subGot, recv.subGot + recv.n, [](int got) { return got >= 0; })) {
      recv.done = true;
      conn.recvs.pop_front();
    }
    return {};
  }
  return internalError("loopback: no receive posted for tag " + std::to_string(send.tag));
}

Status LoopbackTransport::test(void* request, int* done, int* sizes) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++testCalls;
  auto* r = static_cast<FakeRequest*>(request);
  *done = 0;
  if (r->reported) {
    return internalError("loopback: request tested after it was reported done");
  }
  if (r->comm->closed) {
    return internalError("loopback: test on a closed comm");
  }
  LoopbackConnection& conn = *r->comm->conn;
  if (r->comm->isSend && !r->done) {
    if (conn.recv->closed) {
      return remoteError("loopback: peer closed the connection (EOF)", r->comm->peer.text);
    }
    // Sender-driven progress, in posting order up to this request.
    while (!r->done && !conn.sends.empty()) {
      FakeRequest& front = *conn.sends.front();
      Status s = pushSend(front);
      if (!s.ok()) {
        return s;
      }
      if (!front.done) {
        break;
      }
    }
  }
  if (!r->comm->isSend && !r->done && conn.send->closed) {
    return remoteError("loopback: peer closed the connection (EOF)", r->comm->peer.text);
  }
  if (!r->done) {
    return {};
  }
  *done = 1;
  r->reported = true;
  if (sizes != nullptr) {
    if (r->comm->isSend) {
      sizes[0] = static_cast<int>(r->size);
    } else {
      std::copy_n(r->subGot, r->n, sizes);
    }
  }
  return {};
}

Status LoopbackTransport::closeComm(void* comm, bool isSend) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++closeCalls;
  auto* c = static_cast<FakeComm*>(comm);
  if (c->isSend != isSend) {
    return internalError("loopback: close of the wrong direction");
  }
  if (c->closed) {
    ++doubleCloses;
    return internalError("loopback: comm closed twice");
  }
  c->closed = true;
  return {};
}

Status LoopbackTransport::closeSend(void* sendComm) {
  return closeComm(sendComm, true);
}
Status LoopbackTransport::closeRecv(void* recvComm) {
  return closeComm(recvComm, false);
}
Status LoopbackTransport::closeListen(void* listenComm) {
  std::lock_guard<std::mutex> lock(mutex_);
  static_cast<FakeListen*>(listenComm)->closed = true;
  return {};
}

bool LoopbackTransport::bytesMoved(void* comm, uint64_t* bytes) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  *bytes = static_cast<FakeComm*>(comm)->bytes;
  return true;
}

bool LoopbackTransport::endpoints(void* comm, transport::Endpoint* local,
                                  transport::Endpoint* peer) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto* c = static_cast<FakeComm*>(comm);
  *local = c->local;
  *peer = c->peer;
  return true;
}

}  // namespace resilient::test
