#include "tests/unit/hostengine/memory_transport.h"

#include <algorithm>
#include <cstring>

namespace resilient::test {

constexpr uint64_t kMagic = 0x4d454d5452414e53ull;

struct MemoryTransport::MemoryRequest {
  Comm* comm = nullptr;
  bool done = false;
  // send
  char* data = nullptr;
  size_t size = 0;
  int tag = 0;
  // receive
  int n = 0;
  char* buffers[8] = {};
  size_t capacity[8] = {};
  int tags[8] = {};
  size_t got[8] = {};
  bool filled[8] = {};
};

struct MemoryTransport::Channel {
  bool connected = false;
  bool accepted = false;
  Status failed;
  std::deque<MemoryRequest*> sends;
  std::deque<MemoryRequest*> recvs;
};

MemoryTransport::MemoryTransport(int maxRecvs, bool forceFlush)
    : maxRecvs_(maxRecvs), forceFlush_(forceFlush) {}

MemoryTransport::~MemoryTransport() {
  for (MemoryRequest* r : live_) {
    delete r;
  }
}

Status MemoryTransport::initContext(uint64_t, const transport::CommConfig&, void** ctx) {
  *ctx = nullptr;
  return {};
}
Status MemoryTransport::finalizeContext(void*) {
  return {};
}
Status MemoryTransport::devices(int* ndev) {
  *ndev = 1;
  return {};
}
Status MemoryTransport::properties(int, transport::Properties* props) {
  *props = transport::Properties{};
  props->name = "memory";
  props->maxRecvs = maxRecvs_;
  props->forceFlush = forceFlush_ ? 1 : 0;
  props->maxP2pBytes = size_t{1} << 30;
  return {};
}

Status MemoryTransport::listen(void*, int, void* handle, void** listenComm) {
  const std::lock_guard<std::mutex> lock(mutex_);
  channels_.push_back(std::make_unique<Channel>());
  const uint64_t index = channels_.size() - 1;
  std::memset(handle, 0, transport::kHandleSize);
  std::memcpy(handle, &kMagic, 8);
  std::memcpy(static_cast<char*>(handle) + 8, &index, 8);
  *listenComm = new Comm{channels_.back().get(), false, 0};
  return {};
}

Status MemoryTransport::connect(void*, int, void* handle, void** sendComm) {
  uint64_t magic = 0;
  uint64_t index = 0;
  std::memcpy(&magic, handle, 8);
  std::memcpy(&index, static_cast<const char*>(handle) + 8, 8);
  const std::lock_guard<std::mutex> lock(mutex_);
  if (magic != kMagic || index >= channels_.size() || channels_[index]->connected) {
    return invalidUsage("memory: bad handle");
  }
  channels_[index]->connected = true;
  *sendComm = new Comm{channels_[index].get(), true, 0};
  ++liveComms;
  return {};
}

Status MemoryTransport::accept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto* l = static_cast<Comm*>(listenComm);
  const std::lock_guard<std::mutex> lock(mutex_);
  if (l->channel->connected && !l->channel->accepted) {
    l->channel->accepted = true;
    *recvComm = new Comm{l->channel, false, 0};
    ++liveComms;
  }
  return {};
}

Status MemoryTransport::regMr(void*, void*, size_t, int type, void** mhandle) {
  *mhandle = reinterpret_cast<void*>(0x1000);
  return type == transport::kPtrHost ? Status() : invalidUsage("memory: host only");
}
Status MemoryTransport::deregMr(void*, void* mhandle) {
  return mhandle == reinterpret_cast<void*>(0x1000) ? Status() : invalidUsage("memory: bad mh");
}

Status MemoryTransport::isend(void* sendComm, void* data, size_t size, int tag, void*, void*,
                              void** request) {
  auto* c = static_cast<Comm*>(sendComm);
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!c->channel->failed.ok()) {
    return c->channel->failed;
  }
  auto* r = new MemoryRequest();
  r->comm = c;
  r->data = static_cast<char*>(data);
  r->size = size;
  r->tag = tag;
  live_.insert(r);
  c->channel->sends.push_back(r);
  ++c->outstanding;
  maxSendOutstanding = std::max(maxSendOutstanding.load(), c->outstanding);
  *request = r;
  return {};
}

Status MemoryTransport::irecv(void* recvComm, int n, void** data, const size_t* sizes,
                              const int* tags, void**, void**, void** request) {
  auto* c = static_cast<Comm*>(recvComm);
  if (n < 1 || n > maxRecvs_) {
    return invalidUsage("memory: n outside 1..maxRecvs");
  }
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!c->channel->failed.ok()) {
    return c->channel->failed;
  }
  auto* r = new MemoryRequest();
  r->comm = c;
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->buffers[i] = static_cast<char*>(data[i]);
    r->capacity[i] = sizes[i];
    r->tags[i] = tags[i];
    for (int j = 0; j < i; ++j) {
      if (tags[j] == tags[i]) {
        delete r;
        return invalidUsage("memory: duplicate tags in a grouped receive");
      }
    }
  }
  if (n > 1) {
    ++groupedRecvs;
  }
  live_.insert(r);
  c->channel->recvs.push_back(r);
  ++c->outstanding;
  maxRecvOutstanding = std::max(maxRecvOutstanding.load(), c->outstanding);
  *request = r;
  return {};
}

Status MemoryTransport::iflush(void*, int, void**, const int*, void**, void** request) {
  *request = nullptr;
  ++flushes;
  return {};
}

Status MemoryTransport::progress(Channel& ch) {
  while (!ch.sends.empty() && !ch.recvs.empty()) {
    MemoryRequest* s = ch.sends.front();
    MemoryRequest* r = ch.recvs.front();
    int slot = -1;
    for (int i = 0; i < r->n; ++i) {
      if (!r->filled[i] && r->tags[i] == s->tag) {
        slot = i;
        break;
      }
    }
    if (slot < 0) {
      ch.failed = remoteError("memory: a message with tag " + std::to_string(s->tag) +
                              " matches no free buffer");
      return ch.failed;
    }
    if (s->size > r->capacity[slot]) {
      ch.failed = remoteError("memory: message larger than the posted buffer");
      return ch.failed;
    }
    std::memcpy(r->buffers[slot], s->data, s->size);
    r->got[slot] = s->size;
    r->filled[slot] = true;
    s->done = true;
    ch.sends.pop_front();
    if (std::all_of(r->filled, r->filled + r->n, [](bool f) { return f; })) {
      r->done = true;
      ch.recvs.pop_front();
    }
  }
  return {};
}

Status MemoryTransport::test(void* request, int* done, int* sizes) {
  *done = 0;
  const int64_t calls = ++testCalls_;
  const int64_t failAfter = failAfter_.load();
  if (failAfter >= 0 && calls > failAfter) {
    return remoteError("memory: injected failure", "10.0.0.9:1234");
  }
  auto* r = static_cast<MemoryRequest*>(request);
  const std::lock_guard<std::mutex> lock(mutex_);
  Channel& ch = *r->comm->channel;
  if (!ch.failed.ok()) {
    return ch.failed;
  }
  if (!stalled_.load()) {
    RESILIENT_TRY(progress(ch));
  }
  if (!r->done) {
    return {};
  }
  *done = 1;
  if (sizes != nullptr) {
    if (r->comm->send) {
      sizes[0] = static_cast<int>(r->size);
    } else {
      for (int i = 0; i < r->n; ++i) {
        sizes[i] = static_cast<int>(r->got[i]);
      }
    }
  }
  --r->comm->outstanding;
  live_.erase(r);
  delete r;
  return {};
}

Status MemoryTransport::closeSend(void* sendComm) {
  delete static_cast<Comm*>(sendComm);
  --liveComms;
  return {};
}
Status MemoryTransport::closeRecv(void* recvComm) {
  delete static_cast<Comm*>(recvComm);
  --liveComms;
  return {};
}
Status MemoryTransport::closeListen(void* listenComm) {
  delete static_cast<Comm*>(listenComm);
  return {};
}

}  // namespace resilient::test
