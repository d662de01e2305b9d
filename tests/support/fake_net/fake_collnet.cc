// A fake CollNet (fake_collnet.h) exporting ncclCollNetPlugin_v<FAKE_NET_VERSION>,
// linked into a fake net plugin module. Its collectives really reduce and
// gather across the in-process ranks of a group, so results can be checked.
#include "tests/support/fake_net/fake_collnet.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#ifndef FAKE_NET_VERSION
#error "FAKE_NET_VERSION must be set"
#endif

#include "common/signature.h"
#include "nccl/collnet_v10.h"
#include "nccl/collnet_v11.h"
#include "nccl/collnet_v12.h"
#include "nccl/collnet_v6.h"
#include "nccl/collnet_v7.h"
#include "nccl/collnet_v8.h"
#include "nccl/collnet_v9.h"

#define FAKE_COLL_CAT_(a, b) a##b
#define FAKE_COLL_CAT(a, b) FAKE_COLL_CAT_(a, b)
#define V FAKE_NET_VERSION
using Table = FAKE_COLL_CAT(FAKE_COLL_CAT(ncclCollNet_v, V), _t);
using Props = FAKE_COLL_CAT(FAKE_COLL_CAT(ncclNetProperties_v, V), _t);

namespace {

constexpr uint32_t kMagic = 0xC0117E70u;
constexpr int kInt32 = 2;
constexpr int kFloat32 = 7;
constexpr int kSum = 0;
constexpr int kMax = 2;

enum class Kind { kAllReduce, kAllGather, kReduceScatter };

struct Contribution {
  bool posted = false;
  std::vector<char> send;  // AllReduce/AllGather: the send data; ReduceScatter: the window
  char* recv = nullptr;
  std::vector<std::pair<char*, size_t>> recvParts;  // AllGather
};

struct Round {
  Kind kind = Kind::kAllReduce;
  size_t count = 0;  // AllReduce elements
  int dataType = kInt32;
  int redOp = kSum;
  size_t bytesPerRank = 0, windowOffset = 0, windowBytes = 0;
  std::vector<Contribution> ranks;
  int posted = 0;
  bool complete = false;
};

struct Group {
  int nranks = 0;
  std::map<uint64_t, Round> rounds;
};

struct Req;

struct Comm {
  Group* group = nullptr;
  int rank = 0;
  uint64_t nextRound = 0;
  std::set<Req*> reqs;  // not reported done yet; closeColl frees them
};

struct Req {
  Comm* comm = nullptr;
  uint64_t round = 0;
  int size = 0;
  bool flush = false;
};

struct Mh {
  uint32_t magic = kMagic;
};

struct State {
  std::mutex mu;
  FakeCollNetStats stats{};
  std::map<std::string, int> failNext;
  long dmaBuf = 0;
  long stall = 0;
  long devices = 1;
  uint64_t nextListener = 1;
  std::map<uint64_t, std::unique_ptr<Group>> groups;
};

State& state() {
  static State* s = new State();  // never destroyed: threads may outlive statics
  return *s;
}

// A failure injected for `call`, consumed; ncclSuccess when none.
ncclResult_t injected(State& s, const char* call) {
  auto it = s.failNext.find(call);
  if (it == s.failNext.end()) {
    return ncclSuccess;
  }
  const auto r = static_cast<ncclResult_t>(it->second);
  s.failNext.erase(it);
  return r;
}

#define FAKE_ENTER(call)                                          \
  State& s = state();                                             \
  std::lock_guard<std::mutex> lock(s.mu);                         \
  if (ncclResult_t inj = injected(s, call); inj != ncclSuccess) { \
    return inj;                                                   \
  }

template <class T>
void reduceInto(T* acc, const T* in, size_t n, int op) {
  for (size_t i = 0; i < n; ++i) {
    acc[i] = op == kMax ? std::max(acc[i], in[i]) : acc[i] + in[i];
  }
}

void reduceBytes(std::vector<char>& acc, const std::vector<char>& in, int dataType, int op) {
  const size_t n = std::min(acc.size(), in.size());
  if (dataType == kFloat32) {
    reduceInto(reinterpret_cast<float*>(acc.data()), reinterpret_cast<const float*>(in.data()),
               n / sizeof(float), op);
  } else {
    reduceInto(reinterpret_cast<int32_t*>(acc.data()), reinterpret_cast<const int32_t*>(in.data()),
               n / sizeof(int32_t), op);
  }
}

// Every rank posted: the results go to every rank's buffers.
void finish(Round& r) {
  const int n = static_cast<int>(r.ranks.size());
  if (r.kind == Kind::kAllReduce) {
    std::vector<char> acc = r.ranks[0].send;
    for (int k = 1; k < n; ++k)
      reduceBytes(acc, r.ranks[k].send, r.dataType, r.redOp);
    for (Contribution& c : r.ranks)
      std::memcpy(c.recv, acc.data(), acc.size());
  } else if (r.kind == Kind::kAllGather) {
    std::vector<char> all;
    for (Contribution& c : r.ranks)
      all.insert(all.end(), c.send.begin(), c.send.end());
    for (Contribution& c : r.ranks) {
      size_t at = r.windowOffset;
      for (auto& [ptr, size] : c.recvParts) {
        const size_t len = std::min(size, all.size() > at ? all.size() - at : 0);
        std::memcpy(ptr, all.data() + at, len);
        at += size;
      }
    }
  } else {
    // Each rank's window of the full vector, reduced; rank k gets its part.
    std::vector<char> acc = r.ranks[0].send;
    for (int k = 1; k < n; ++k)
      reduceBytes(acc, r.ranks[k].send, r.dataType, r.redOp);
    for (int k = 0; k < n; ++k) {
      const size_t begin = static_cast<size_t>(k) * r.bytesPerRank;
      const size_t lo = std::max(begin, r.windowOffset);
      const size_t hi = std::min(begin + r.bytesPerRank, r.windowOffset + r.windowBytes);
      if (lo < hi) {
        std::memcpy(r.ranks[k].recv + (lo - begin), acc.data() + (lo - r.windowOffset), hi - lo);
      }
    }
  }
  r.complete = true;
}

// Joins this rank's contribution to its next round; the request.
Req* post(State& s, Comm* comm, const Round& shape, Contribution c, int size) {
  Round& r = comm->group->rounds[comm->nextRound];
  if (r.ranks.empty()) {
    r = shape;
    r.ranks.resize(static_cast<size_t>(comm->group->nranks));
  }
  c.posted = true;
  r.ranks[static_cast<size_t>(comm->rank)] = std::move(c);
  if (++r.posted == comm->group->nranks)
    finish(r);
  auto* req = new Req{comm, comm->nextRound++, size, false};
  comm->reqs.insert(req);
  ++s.stats.liveRequests;
  return req;
}

template <class P>
void fillProps(int dev, P* p) {
  std::memset(p, 0, sizeof *p);
  static char name[] = "FakeCollNet";
  static char pci[] = "/sys/devices/fake/collnet0";
  p->name = name;
  p->pciPath = pci;
  p->guid = 0xC0110000ull + static_cast<uint64_t>(dev);
  p->ptrSupport = 0x1 | (state().dmaBuf != 0 ? 0x4 : 0);
  p->speed = 123456;
  p->port = 7;
  p->latency = 2.5f;
  p->maxComms = 77;
  p->maxRecvs = 1;
  if constexpr (requires { p->netDeviceType; }) {
    p->netDeviceType = NCCL_NET_DEVICE_HOST;
    p->netDeviceVersion = 0;
  }
  if constexpr (requires { p->regIsGlobal; })
    p->regIsGlobal = 1;
  if constexpr (requires { p->vProps; }) {
    p->forceFlush = 1;
    p->vProps.ndevs = 1;
    p->vProps.devs[0] = dev;
    p->maxP2pBytes = size_t{1} << 33;
    p->maxCollBytes = size_t{3} << 30;
  }
  if constexpr (requires { p->maxMultiRequestSize; })
    p->maxMultiRequestSize = 3;
  if constexpr (requires { p->railId; }) {
    p->railId = 5;
    p->planeId = 6;
  }
}

ncclResult_t devices(int* ndev) {
  FAKE_ENTER("devices");
  ++s.stats.devicesCalls;
  *ndev = static_cast<int>(s.devices);
  return ncclSuccess;
}

ncclResult_t getProperties(int dev, Props* props) {
  FAKE_ENTER("getProperties");
  fillProps(dev, props);
  return ncclSuccess;
}

ncclResult_t listenImpl(void* handle, void** listenComm) {
  FAKE_ENTER("listen");
  ++s.stats.listenCalls;
  ++s.stats.liveComms;
  const uint64_t id = s.nextListener++;
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &kMagic, sizeof kMagic);
  std::memcpy(static_cast<char*>(handle) + 8, &id, sizeof id);
  *listenComm = new uint64_t(id);
  return ncclSuccess;
}

ncclResult_t connect(void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  FAKE_ENTER("connect");
  ++s.stats.connectCalls;
  s.stats.lastNranks = nranks;
  s.stats.lastRank = rank;
  *collComm = nullptr;
  uint32_t magic = 0;
  std::memcpy(&magic, handles[0], sizeof magic);
  if (magic != kMagic || listenComm == nullptr)
    return ncclInternalError;
  uint64_t key = 0;
  std::memcpy(&key, static_cast<char*>(handles[0]) + 8, sizeof key);
  std::unique_ptr<Group>& g = s.groups[key];
  if (g == nullptr) {
    g = std::make_unique<Group>();
    g->nranks = nranks;
  }
  ++s.stats.liveComms;
  *collComm = new Comm{g.get(), rank, 0, {}};
  return ncclSuccess;
}

ncclResult_t reduceSupport(int dataType, int redOp, int* supported) {
  FAKE_ENTER("reduceSupport");
  ++s.stats.reduceSupportCalls;
  *supported = (dataType == kInt32 || dataType == kFloat32) && (redOp == kSum || redOp == kMax);
  return ncclSuccess;
}

template <class Size>
ncclResult_t regMr(void* /*comm*/, void* /*data*/, Size /*size*/, int /*type*/, void** mh) {
  FAKE_ENTER("regMr");
  ++s.stats.regMrCalls;
  ++s.stats.liveMhandles;
  *mh = new Mh;
  s.stats.lastRegMh = *mh;
  return ncclSuccess;
}

ncclResult_t regMrDmaBuf(void* /*comm*/, void* /*data*/, size_t /*size*/, int /*type*/,
                         uint64_t offset, int fd, void** mh) {
  FAKE_ENTER("regMrDmaBuf");
  ++s.stats.regMrDmaBufCalls;
  ++s.stats.liveMhandles;
  s.stats.lastDmaBufFd = fd;
  s.stats.lastDmaBufOffset = offset;
  *mh = new Mh;
  s.stats.lastRegMh = *mh;
  return ncclSuccess;
}

ncclResult_t deregMr(void* /*comm*/, void* mh) {
  FAKE_ENTER("deregMr");
  ++s.stats.deregMrCalls;
  --s.stats.liveMhandles;
  delete static_cast<Mh*>(mh);
  return ncclSuccess;
}

size_t elemSize(int dataType) {
  return dataType == kFloat32 ? sizeof(float) : sizeof(int32_t);
}

template <class Count>
ncclResult_t iallreduce(void* collComm, void* send, void* recv, Count count, int dataType,
                        int redOp, void* sendMh, void* recvMh, void** request) {
  FAKE_ENTER("iallreduce");
  ++s.stats.iallreduceCalls;
  s.stats.lastCount = static_cast<size_t>(count);
  s.stats.lastDataType = dataType;
  s.stats.lastRedOp = redOp;
  s.stats.lastSendMh = sendMh;
  s.stats.lastRecvMh = recvMh;
  const size_t bytes = static_cast<size_t>(count) * elemSize(dataType);
  Round shape;
  shape.kind = Kind::kAllReduce;
  shape.count = static_cast<size_t>(count);
  shape.dataType = dataType;
  shape.redOp = redOp;
  Contribution c;
  c.send.assign(static_cast<char*>(send), static_cast<char*>(send) + bytes);
  c.recv = static_cast<char*>(recv);
  *request = post(s, static_cast<Comm*>(collComm), shape, std::move(c), static_cast<int>(bytes));
  return ncclSuccess;
}

template <class Sge>
void noteParts(State& s, int n, const Sge* parts) {
  s.stats.lastNParts = n;
  s.stats.lastPartSize = n > 0 ? static_cast<size_t>(parts[0].size) : 0;
  s.stats.lastPartMh = n > 0 ? parts[0].mhandle : nullptr;
}

template <class Sge>
ncclResult_t iallgather(void* collComm, void* send, int nRecvParts, Sge* recvParts,
                        size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void* sendMh,
                        void** request) {
  FAKE_ENTER("iallgather");
  ++s.stats.iallgatherCalls;
  noteParts(s, nRecvParts, recvParts);
  s.stats.lastBytesPerRank = bytesPerRank;
  s.stats.lastWindowOffset = windowOffset;
  s.stats.lastWindowBytes = windowBytes;
  s.stats.lastSendMh = sendMh;
  Round shape;
  shape.kind = Kind::kAllGather;
  shape.bytesPerRank = bytesPerRank;
  shape.windowOffset = windowOffset;
  shape.windowBytes = windowBytes;
  Contribution c;
  c.send.assign(static_cast<char*>(send), static_cast<char*>(send) + bytesPerRank);
  for (int i = 0; i < nRecvParts; ++i) {
    c.recvParts.emplace_back(static_cast<char*>(recvParts[i].address),
                             static_cast<size_t>(recvParts[i].size));
  }
  *request =
      post(s, static_cast<Comm*>(collComm), shape, std::move(c), static_cast<int>(windowBytes));
  return ncclSuccess;
}

template <class Sge>
ncclResult_t ireducescatter(void* collComm, int nSendParts, Sge* sendParts, void* recv,
                            size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                            int dataType, int redOp, void* recvMh, void** request) {
  FAKE_ENTER("ireducescatter");
  ++s.stats.ireducescatterCalls;
  noteParts(s, nSendParts, sendParts);
  s.stats.lastBytesPerRank = bytesPerRank;
  s.stats.lastWindowOffset = windowOffset;
  s.stats.lastWindowBytes = windowBytes;
  s.stats.lastDataType = dataType;
  s.stats.lastRedOp = redOp;
  s.stats.lastRecvMh = recvMh;
  Round shape;
  shape.kind = Kind::kReduceScatter;
  shape.bytesPerRank = bytesPerRank;
  shape.windowOffset = windowOffset;
  shape.windowBytes = windowBytes;
  shape.dataType = dataType;
  shape.redOp = redOp;
  Contribution c;
  for (int i = 0; i < nSendParts; ++i) {
    const char* p = static_cast<const char*>(sendParts[i].address);
    c.send.insert(c.send.end(), p, p + sendParts[i].size);
  }
  c.recv = static_cast<char*>(recv);
  *request =
      post(s, static_cast<Comm*>(collComm), shape, std::move(c), static_cast<int>(bytesPerRank));
  return ncclSuccess;
}

ncclResult_t iflush(void* collComm, void* /*data*/, int size, void* /*mh*/, void** request) {
  FAKE_ENTER("iflush");
  ++s.stats.iflushCalls;
  s.stats.lastFlushSize = size;
  ++s.stats.liveRequests;
  auto* comm = static_cast<Comm*>(collComm);
  auto* req = new Req{comm, 0, 0, true};
  comm->reqs.insert(req);
  *request = req;
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* size) {
  FAKE_ENTER("test");
  ++s.stats.testCalls;
  auto* r = static_cast<Req*>(request);
  *done = 0;
  if (s.stall != 0)
    return ncclSuccess;
  if (!r->flush && !r->comm->group->rounds[r->round].complete)
    return ncclSuccess;
  *done = 1;
  if (size != nullptr)
    *size = r->size;
  --s.stats.liveRequests;
  r->comm->reqs.erase(r);
  delete r;
  return ncclSuccess;
}

ncclResult_t closeColl(void* collComm) {
  FAKE_ENTER("closeColl");
  ++s.stats.closeCollCalls;
  --s.stats.liveComms;
  auto* comm = static_cast<Comm*>(collComm);
  for (Req* r : comm->reqs) {  // posted and never completed (a stall, a failed round)
    --s.stats.liveRequests;
    delete r;
  }
  delete comm;
  return ncclSuccess;
}

ncclResult_t closeListen(void* listenComm) {
  FAKE_ENTER("closeListen");
  ++s.stats.closeListenCalls;
  --s.stats.liveComms;
  delete static_cast<uint64_t*>(listenComm);
  return ncclSuccess;
}

template <class VProps>
ncclResult_t makeVDevice(int* d, VProps* props) {
  FAKE_ENTER("makeVDevice");
  ++s.stats.makeVDeviceCalls;
  s.stats.lastVDeviceNdevs = props->ndevs;
  *d = static_cast<int>(s.devices) + 40;
  return ncclSuccess;
}

// Fills the table's members in init (as some real plugins do); regMrDmaBuf
// only with the "dmaBuf" knob.
void fillTable(Table& t);

#if V >= 11
ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t /*logger*/);
ncclResult_t listenCtx(void* /*ctx*/, int /*dev*/, void* handle, void** listenComm) {
  return listenImpl(handle, listenComm);
}
ncclResult_t finalize(void* ctx) {
  FAKE_ENTER("finalize");
  ++s.stats.finalizeCalls;
  --s.stats.liveContexts;
  delete static_cast<uint64_t*>(ctx);
  return ncclSuccess;
}
#else
ncclResult_t init(ncclDebugLogger_t /*logger*/);
ncclResult_t listenLegacy(int /*dev*/, void* handle, void** listenComm) {
  return listenImpl(handle, listenComm);
}
#endif

}  // namespace

extern "C" {
// Only name and init until init fills the rest (as nccl-rdma-sharp-plugins does).
__attribute__((visibility("default"))) Table FAKE_COLL_CAT(ncclCollNetPlugin_v, V) = [] {
  Table t{};
  t.name = "FakeCollNet";
  t.init = &init;
  return t;
}();

__attribute__((visibility("default"))) void fakeCollNetStats(FakeCollNetStats* out) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  *out = s.stats;
  out->version = V;
}

__attribute__((visibility("default"))) void fakeCollNetReset(void) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.stats = FakeCollNetStats{};
  s.failNext.clear();
  s.dmaBuf = 0;
  s.stall = 0;
  s.devices = 1;
  s.groups.clear();
}

__attribute__((visibility("default"))) void fakeCollNetFailNext(const char* call, int result) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.failNext[call] = result;
}

__attribute__((visibility("default"))) int fakeCollNetSet(const char* knob, long value) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  const std::string k = knob;
  if (k == "dmaBuf") {
    s.dmaBuf = value;
  } else if (k == "stall") {
    s.stall = value;
  } else if (k == "devices") {
    s.devices = value;
  } else {
    return -1;
  }
  return 0;
}
}  // extern "C"

namespace {

void fillTable(Table& t) {
  t.devices = &devices;
  t.getProperties = &getProperties;
#if V >= 11
  t.listen = &listenCtx;
  t.finalize = &finalize;
#else
  t.listen = &listenLegacy;
#endif
  t.connect = &connect;
  t.reduceSupport = &reduceSupport;
  t.regMr = &regMr<typename resilient::Signature<decltype(Table::regMr)>::template Param<2>>;
  t.regMrDmaBuf = state().dmaBuf != 0 ? &regMrDmaBuf : nullptr;
  t.deregMr = &deregMr;
  t.iallreduce = &iallreduce<typename resilient::Signature<decltype(Table::iallreduce)>::template Param<3>>;
#if V >= 8
  using Sge = std::remove_pointer_t<typename resilient::Signature<decltype(Table::iallgather)>::template Param<3>>;
  t.iallgather = &iallgather<Sge>;
  t.ireducescatter = &ireducescatter<Sge>;
#endif
  t.iflush = &iflush;
  t.test = &test;
  t.closeColl = &closeColl;
  t.closeListen = &closeListen;
#if V >= 9
  using VProps =
      std::remove_pointer_t<typename resilient::Signature<decltype(Table::makeVDevice)>::template Param<1>>;
  t.makeVDevice = &makeVDevice<VProps>;
#endif
}

#if V >= 11
ncclResult_t init(void** ctx, uint64_t commId, ncclDebugLogger_t /*logger*/) {
  {
    FAKE_ENTER("init");
    ++s.stats.initCalls;
    ++s.stats.liveContexts;
    s.stats.lastCommId = commId;
    *ctx = new uint64_t(commId);
  }
  fillTable(FAKE_COLL_CAT(ncclCollNetPlugin_v, V));
  return ncclSuccess;
}
#else
ncclResult_t init(ncclDebugLogger_t /*logger*/) {
  {
    FAKE_ENTER("init");
    ++s.stats.initCalls;
  }
  fillTable(FAKE_COLL_CAT(ncclCollNetPlugin_v, V));
  return ncclSuccess;
}
#endif

}  // namespace
