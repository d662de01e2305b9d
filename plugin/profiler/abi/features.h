// What each version of NCCL's profiler descriptors and state arguments
// gives, detected from the structs' members (docs/reference/nccl-abi.md §2.4, §2.5, §2.8):
//
//   v1      func, datatype, algo, proto are numeric codes; coll.trafficBytes
//   v1-v3   coll/p2p carry commHash (init does not give it); coll has
//           nMaxChannels (an upper bound), p2p no channel count
//   v2      coll.trafficBytes
//   v3+     KernelCh (v4+: with GPU start and stop times) and NetPlugin events
//   v4+     coll.nChannels, p2p.nChannels
//   v5      type widened to 64 bits; API and kernel-launch events
//   v6      copy-engine events (not tracked: nothing here)
//   v7      coll/p2p userTag, coll.isSymColl; KernelPhase events, whose
//           stop time comes in the state arguments' kernelCh.pTimer
//           (docs/reference/nccl-2.31-plugins.md §1.2, §1.3)
//
// descriptor.h branches on these concepts; each adapter states what its
// version must give (static_assert on featuresOf), so a renamed member
// cannot silently turn a feature off.
#pragma once

#include <type_traits>

namespace resilient::profiler::abi {

// M: a coll or p2p member of a descriptor.
template <class M>
concept StringNames = std::is_same_v<decltype(M::func), const char*>;
template <class M>
concept HasCommHash = requires(const M& m) {
  m.commHash;
};
template <class M>
concept HasChannels = requires(const M& m) {
  m.nChannels;
};
template <class M>
concept HasMaxChannels = requires(const M& m) {
  m.nMaxChannels;
};
template <class M>
concept HasAlgoProto = requires(const M& m) {
  m.algo;
  m.proto;
};
template <class M>
concept HasTrafficBytes = requires(const M& m) {
  m.trafficBytes;
};
template <class M>
concept HasUserTag = requires(const M& m) {
  m.userTag;
};
template <class M>
concept HasSymColl = requires(const M& m) {
  m.isSymColl;
};

// D: a descriptor; A: state arguments.
template <class D>
concept HasKernelCh = requires(const D& d) {
  d.kernelCh.channelId;
};
template <class D>
concept HasKernelStartTime = requires(const D& d) {
  d.kernelCh.pTimer;
};
template <class A>
concept HasKernelStopTime = requires(const A& a) {
  a.kernelCh.pTimer;
};
template <class D>
concept HasNetPlugin = requires(const D& d) {
  d.netPlugin;
};
template <class D>
concept HasKernelPhase = requires(const D& d) {
  d.kernelPhase.phaseId;
  d.kernelPhase.pTimer;
};

struct Features {
  bool stringNames = true;     // func/datatype/algo/proto as strings (v1: codes)
  bool commHash = false;       // coll/p2p carry commHash (v1-v3)
  bool exactChannels = false;  // coll and p2p nChannels (v4+)
  bool trafficBytes = false;   // coll.trafficBytes (v1, v2)
  bool kernelCh = false;       // KernelCh events (v3+)
  bool gpuTimes = false;       // KernelCh start and KernelChStop GPU times (v4+)
  bool netPlugin = false;      // NetPlugin events (v3+)
  bool userTag = false;        // coll and p2p userTag (v7)
  bool symColl = false;        // coll.isSymColl (v7)
  bool kernelPhase = false;    // KernelPhase events, with GPU start and stop times (v7)
  constexpr bool operator==(const Features&) const = default;
};

template <class D, class A>
constexpr Features featuresOf() {
  using Coll = decltype(D::coll);
  using P2p = decltype(D::p2p);
  Features f;
  f.stringNames = StringNames<Coll> && StringNames<P2p>;
  f.commHash = HasCommHash<Coll> && HasCommHash<P2p>;
  f.exactChannels = HasChannels<Coll> && HasChannels<P2p>;
  f.trafficBytes = HasTrafficBytes<Coll>;
  f.kernelCh = HasKernelCh<D>;
  f.gpuTimes = HasKernelStartTime<D> && HasKernelStopTime<A>;
  f.netPlugin = HasNetPlugin<D>;
  f.userTag = HasUserTag<Coll> && HasUserTag<P2p>;
  f.symColl = HasSymColl<Coll>;
  f.kernelPhase = HasKernelPhase<D> && HasKernelStopTime<A>;
  return f;
}

}  // namespace resilient::profiler::abi
