// The collective-network seam (NCCL's CollNet, e.g. SHARP): what the
// resilient layer wraps next to the net transport (transport.h).
//
// One version-neutral interface with the semantics of NCCL's newest CollNet
// ABI (ncclCollNet_v12: docs/reference/nccl-abi.md, fact sheet §6) in typed
// C++ objects: a CollNet makes CollListeners (one per rank, listen) and,
// from every rank's listen handle, a CollComm (connect); the comm posts
// collectives and owns their Requests (transport.h's Request: test(done,
// size)). Untyped pointers stay at the two edges, as for the net: the
// adapter of another plugin .so (external/) and our exported ABI tables
// (plugin/net/abi/collnet_*).
//
// Contract (NCCL's, src/transport/coll_net.cc and src/plugin/net.cc):
// - connect() is called once per comm and may block (all ranks call it);
//   an empty comm with ok means "no CollNet for this communicator".
// - iallreduce/iallgather/ireducescatter/iflush return ok with *request ==
//   nullptr for "cannot post now, retry"; test() reports done once.
// - Calls on one comm come from one proxy thread at a time.
// - A comm outlives its requests and regions; close() says how it went.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"
#include "plugin/transport/transport.h"

namespace resilient::transport {

// What a CollNet offers beyond the calls every one has; each is offered to
// NCCL exactly when the inner CollNet has it. NCCL does not NULL-check
// regMrDmaBuf when ptrSupport says DMA-BUF (coll_net.cc, sendProxyConnect):
// ptrSupport is passed through and regMrDmaBuf offered exactly as the inner has it.
struct CollCapabilities {
  bool regMrDmaBuf = false;
  bool iallgather = false;      // v8+; NULL: no AllGather over CollNet (src/graph/tuning.cc)
  bool ireducescatter = false;  // v8+
  bool makeVDevice = false;     // v9+
};

// One piece of a scatter-gather collective (NCCL's ncclNetSGE_vN_t).
struct CollPiece {
  MemoryRegion* region = nullptr;
  std::byte* address = nullptr;
  size_t size = 0;
};

// NCCL's reduction arguments, carried as NCCL's int enum values.
struct Reduction {
  int dataType = 0;  // ncclDataType_t
  int redOp = 0;     // ncclRedOp_t
};

// The window of an AllGather/ReduceScatter step (NCCL's bytesPerRank,
// windowOffset, windowBytes).
struct CollWindow {
  size_t bytesPerRank = 0;
  size_t offset = 0;
  size_t bytes = 0;
};

// A collective comm: regMr/regMrDmaBuf/deregMr/close from Comm.
class CollComm : public Comm {
 public:
  virtual Status iallreduce(std::byte* send, std::byte* recv, size_t count, Reduction op,
                            MemoryRegion* sendRegion, MemoryRegion* recvRegion,
                            Request** request) = 0;
  // Optional (CollCapabilities); the defaults refuse.
  virtual Status iallgather(std::byte* send, int nRecvParts, const CollPiece* recvParts,
                            CollWindow window, MemoryRegion* sendRegion, Request** request) {
    (void)send, (void)nRecvParts, (void)recvParts, (void)window, (void)sendRegion;
    *request = nullptr;
    return invalidUsage("iallgather: this CollNet has no AllGather");
  }
  virtual Status ireducescatter(int nSendParts, const CollPiece* sendParts, std::byte* recv,
                                CollWindow window, Reduction op, MemoryRegion* recvRegion,
                                Request** request) {
    (void)nSendParts, (void)sendParts, (void)recv, (void)window, (void)op, (void)recvRegion;
    *request = nullptr;
    return invalidUsage("ireducescatter: this CollNet has no ReduceScatter");
  }
  virtual Status iflush(std::byte* data, int size, MemoryRegion* region, Request** request) = 0;
};

class CollListener {
 public:
  virtual ~CollListener() = default;
  virtual Status close() = 0;
};

class CollNet {
 public:
  virtual ~CollNet() = default;

  virtual const char* name() const noexcept = 0;
  // Per communicator (v11+ init); older CollNets init once and leave *ctx empty.
  virtual Status initContext(uint64_t commId, std::unique_ptr<Context>* ctx) = 0;
  virtual Status devices(int* ndev) = 0;
  virtual Status properties(int dev, Properties* props) = 0;
  // handle: kHandleSize bytes, exchanged by NCCL between the ranks.
  virtual Status listen(Context* ctx, int dev, std::byte* handle,
                        std::unique_ptr<CollListener>* listener) = 0;
  // handles: nranks listen handles, this rank's at `rank`.
  virtual Status connect(std::byte* const* handles, int nranks, int rank, CollListener& listener,
                         std::unique_ptr<CollComm>* comm) = 0;
  virtual Status reduceSupport(Reduction op, int* supported) = 0;
  virtual CollCapabilities capabilities() const noexcept { return {}; }
  virtual Status makeVDevice(const VirtualDevice& props, int* dev) {
    (void)props;
    *dev = -1;
    return invalidUsage("makeVDevice: this CollNet cannot fuse devices");
  }
};

}  // namespace resilient::transport
