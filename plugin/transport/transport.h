// The inner transport seam of the net plugin: what the resilient layer wraps.
//
// One version-neutral interface with the semantics of NCCL's newest net ABI
// (v11, docs/reference/nccl-abi.md §1.5 and §1.8), in C++ types: every call returns a Status
// instead of an ncclResult_t, sizes are size_t, comms and requests are opaque
// pointers owned by the transport. Implementations mirror each other's file
// names: tcp/ (our own TCP), external/ (another NCCL net plugin .so, loaded
// through its own ABI version), fault/ (fault injection) and raw/ (the tools' TCP baseline).
//
// Contract (what NCCL, and therefore the resilient layer, relies on):
// - No call blocks. connect/accept return ok with *comm == nullptr to be
//   polled again; isend/irecv return ok with *request == nullptr for "cannot
//   post now, retry".
// - Calls on one comm come from one thread at a time (NCCL's proxy threads),
//   calls on different comms may run concurrently.
// - connect() gets the caller's handle buffer, writable and the same across the
//   polls of one connection: NCCL's own socket and IB plugins keep their
//   connect state in it between polls.
// - A failed comm stays failed: every later call on it returns an error.
// - test() reports done once; the request is then released by the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"

namespace resilient::transport {

// Bytes of the opaque listen handle NCCL exchanges between the two sides.
inline constexpr size_t kHandleSize = 128;
// Outstanding requests NCCL may have per comm (NCCL_NET_MAX_REQUESTS).
inline constexpr int kMaxRequests = 32;

// Memory types of regMr and of Properties::ptrSupport (NCCL_PTR_*).
inline constexpr int kPtrHost = 0x1;
inline constexpr int kPtrCuda = 0x2;
inline constexpr int kPtrDmaBuf = 0x4;

// One device as the transport describes it. The strings are owned by the
// transport and stay valid until it is destroyed.
struct Properties {
  const char* name = nullptr;
  const char* pciPath = nullptr;  // sysfs path of the PCI device, or nullptr (virtual)
  uint64_t guid = 0;
  int ptrSupport = kPtrHost;
  int regIsGlobal = 0;
  int forceFlush = 0;
  int speedMbps = 0;
  int port = 0;
  float latencyUs = 0;
  int maxComms = 65536;
  int maxRecvs = 1;        // largest n of a grouped irecv
  size_t maxP2pBytes = 0;  // largest single transfer
  size_t maxCollBytes = 0;
  // The device's rail and plane (v12; -1: not known), for NCCL's topology.
  int railId = -1;
  int planeId = -1;
};

// Per-communicator settings NCCL hands to init (v11) or connect (v10).
struct CommConfig {
  int trafficClass = -1;  // -1: undefined
};

// An address as text: "10.0.0.2:40000" or "[fe80::1]:40000"; empty when unknown.
struct Endpoint {
  char text[64] = {};
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Short name for logs ("tcp", or the wrapped plugin's name).
  virtual const char* name() const noexcept = 0;

  // Per-communicator context (NCCL v11 init/finalize). Transports without
  // per-communicator state return nullptr in *ctx.
  virtual Status initContext(uint64_t commId, const CommConfig& config, void** ctx) = 0;
  virtual Status finalizeContext(void* ctx) = 0;

  virtual Status devices(int* ndev) = 0;
  virtual Status properties(int dev, Properties* props) = 0;

  // Bytes of the listen handle this transport writes (<= kHandleSize). The
  // resilient layer uses the bytes after it.
  virtual size_t handleBytes() const noexcept = 0;

  virtual Status listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  virtual Status connect(void* ctx, int dev, void* handle, void** sendComm) = 0;
  virtual Status accept(void* listenComm, void** recvComm) = 0;

  virtual Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual Status deregMr(void* comm, void* mhandle) = 0;

  // phandle/phandles: NCCL's profiler handles, passed through (may be nullptr).
  virtual Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                       void* phandle, void** request) = 0;
  virtual Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
                       void** mhandles, void** phandles, void** request) = 0;
  virtual Status iflush(void* recvComm, int n, void** data, const int* sizes, void** mhandles,
                        void** request) = 0;
  // sizes: nullptr, or 1 (send) / n (receive) ints that receive the sizes.
  virtual Status test(void* request, int* done, int* sizes) = 0;

  virtual Status closeSend(void* sendComm) = 0;
  virtual Status closeRecv(void* recvComm) = 0;
  virtual Status closeListen(void* listenComm) = 0;

  // irecvConsumed (v7+, optional): NCCL calls it once per completed receive,
  // in order, with that receive's (already completed) request, after the
  // data was consumed. hasIrecvConsumed: whether the plugin has one; the
  // call does nothing otherwise.
  virtual bool hasIrecvConsumed() const noexcept { return false; }
  virtual Status irecvConsumed(void* recvComm, int n, void* request) {
    (void)recvComm;
    (void)n;
    (void)request;
    return {};
  }

  // Optional observations the resilient layer uses when the transport has them.
  // Bytes moved so far on a comm (both directions); monotonic. Transports that
  // cannot tell return false and the layer counts completed requests instead.
  virtual bool bytesMoved(void* comm, uint64_t* bytes) noexcept {
    (void)comm;
    (void)bytes;
    return false;
  }
  // Whether a send comm has bytes the network has not taken yet, now (the
  // watchdog samples it at each tick: the share of time a link is backlogged
  // is how long it was the limit; jobhealth/slow_links.h). Transports that
  // cannot tell return false and the resilient layer samples whether
  // requests are outstanding instead.
  virtual bool linkBacklogged(void* comm, bool* backlogged) noexcept {
    (void)comm;
    (void)backlogged;
    return false;
  }
  // The local and peer addresses of a connected comm, when the transport knows them.
  virtual bool endpoints(void* comm, Endpoint* local, Endpoint* peer) noexcept {
    (void)comm;
    (void)local;
    (void)peer;
    return false;
  }
};

}  // namespace resilient::transport
