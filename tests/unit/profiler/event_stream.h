// Synthetic NCCL event streams for the profiler tests, in the order NCCL
// 2.28 emits them (docs/reference/nccl-abi.md §2.6; src/enqueue.cc, group.cc,
// plugin/profiler.cc, transport/profiler.cc at v2.28.9):
//
//   user thread, one implicit group (v5):
//     GroupApi start, record GroupStartApiStop, CollApi start,
//     record GroupEndApiStart, KernelLaunch start/stop (NCCL emits these two
//     only when the mask has KernelLaunch, which ours never has: replayed to
//     check that they are tolerated),
//     Group start, Coll start, Coll stop (proxy ops posted), Group stop,
//     GroupApi stop, CollApi stop
//   (v1-v4: Group start, Coll start, Coll stop, Group stop)
//   proxy progress thread, per channel, channels interleaved:
//     ProxyOp start (send, recv), ProxyOp state, KernelCh start (v3+),
//     ProxyStep start / states / stop (send: SendGPUWait, SendPeerWait,
//     SendWait; recv: RecvWait, RecvFlushWait, RecvGPUWait), NetPlugin
//     events under send steps (v3+), KernelCh KernelChStop state + stop
//     (v4+; v3 stop only), ProxyOp stops.
//   v7 (NCCL 2.31.2 src/plugin/profiler.cc, profilerFireKernelPhaseEvents):
//     right before a channel's KernelChStop, its kernel phases one after the
//     other, each KernelPhase start (parent the KernelCh) / record
//     KernelPhaseStop / stop: initial_sync (left out when of zero length, as
//     NCCL does), compute, final_sync. Coll and P2p carry a user tag, Coll
//     isSymColl.
//
// Events name each other by small integer ids; a replay keeps the handle
// each start returned under its id and passes it as the children's parentObj.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <set>
#include <vector>

namespace resilient::test {

enum class EventKind { kStart, kStop, kRecord };
enum class EventType {
  kGroupApi,
  kCollApi,
  kP2pApi,
  kKernelLaunch,
  kGroup,
  kColl,
  kP2p,
  kProxyOp,
  kProxyStep,
  kProxyCtrl,
  kKernelCh,
  kNetPlugin,
  kKernelPhase,
};

struct Event {
  EventKind kind = EventKind::kStart;
  int id = -1;  // the event this concerns
  EventType type = EventType::kColl;
  int parent = -1;  // start: the parent's id; -1 passes NULL
  int thread = 0;   // 0: user thread, 1: proxy progress thread
  // start descriptor
  uint64_t seqNumber = 0;
  const char* func = "AllReduce";
  const char* datatype = "ncclFloat32";
  const char* algo = "RING";
  const char* proto = "SIMPLE";
  size_t count = 0;
  int rootOrPeer = 0;
  uint8_t nChannels = 0;
  uint8_t channel = 0;
  int isSend = 0;
  int step = 0;
  int nSteps = 0;
  uint64_t pTimer = 0;
  pid_t pid = 0;  // 0: our own pid
  int groupDepth = 1;
  uint64_t commHash = 0;  // v1-v3 Coll/P2p descriptors
  int rank = 0;
  uint64_t userTag = 0;    // v7 Coll/P2p (and their API events)
  bool isSymColl = false;  // v7 Coll
  uint8_t phaseId = 0;     // v7 KernelPhase (with channel, pTimer)
  // record
  int state = 0;
  uint64_t stateTimer = 0;
};

struct CollSpec {
  uint64_t seqNumber = 0;
  const char* func = "AllReduce";
  size_t count = 1024;
  int root = 0;
  uint8_t nChannels = 2;
  int nSteps = 2;
  bool network = true;       // proxy ops and steps (false: intra-node, kernel channels only)
  std::set<int> neverStop;   // channels that hang: kernel (v3+) and recv proxy never stop
  std::set<int> neverStart;  // channels whose kernel and proxy never start (no event at all)
  bool proxyCtrl = false;    // add a proxy-control event (passive for the plugin)
  uint64_t userTag = 0;      // v7
  bool symmetric = false;    // v7: coll.isSymColl
  // v7: each channel's initial-sync phase, GPU ns (0: of zero length, left
  // out); channels beyond the list: 2000 + 100 x channel.
  std::vector<uint64_t> syncNs;
};

struct P2pSpec {
  const char* func = "Send";
  size_t count = 256;
  int peer = 1;
  uint8_t nChannels = 1;
  int nSteps = 1;
  uint64_t userTag = 0;  // v7
};

class StreamBuilder {
 public:
  StreamBuilder(int abiVersion, uint64_t commHash, int rank);

  // Appends one operation's events; returns the id of its Coll/P2p event.
  int collective(const CollSpec& spec);
  int p2p(const P2pSpec& spec);

  int version() const { return version_; }
  int ids() const { return nextId_; }
  std::vector<Event> events;

 private:
  int newId() { return nextId_++; }
  // User-thread events of an operation; returns the id of the Coll/P2p event.
  int userEvents(EventType opType, const Event& opDescr);
  void progressEvents(int opId, uint8_t nChannels, int nSteps, bool network,
                      const std::set<int>& neverStop, const std::set<int>& neverStart, int peer,
                      const std::vector<uint64_t>& syncNs);
  // v7: a channel's kernel phases between its GPU start and stop.
  void phaseEvents(std::vector<Event>& ev, int kernel, int channel, uint64_t beginNs,
                   uint64_t syncNs, uint64_t endNs);

  int version_;
  uint64_t commHash_;
  int rank_;
  int nextId_ = 0;
  uint64_t gpuNs_ = 5000000000ull;
};

}  // namespace resilient::test
