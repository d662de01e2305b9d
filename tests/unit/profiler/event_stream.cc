#include "event_stream.h"

#include <algorithm>

#include "nccl/profiler_common.h"

namespace resilient::test {
namespace {

Event start(int id, EventType type, int parent, int thread) {
  Event e;
  e.kind = EventKind::kStart;
  e.id = id;
  e.type = type;
  e.parent = parent;
  e.thread = thread;
  return e;
}

Event stop(int id, int thread) {
  Event e;
  e.kind = EventKind::kStop;
  e.id = id;
  e.thread = thread;
  return e;
}

Event record(int id, int state, int thread, uint64_t timer = 0) {
  Event e;
  e.kind = EventKind::kRecord;
  e.id = id;
  e.state = state;
  e.stateTimer = timer;
  e.thread = thread;
  return e;
}

}  // namespace

StreamBuilder::StreamBuilder(int abiVersion, uint64_t commHash, int rank)
    : version_(abiVersion), commHash_(commHash), rank_(rank) {}

int StreamBuilder::userEvents(EventType opType, const Event& opDescr) {
  const bool coll = opType == EventType::kColl;
  int groupApi = -1;
  int api = -1;
  if (version_ >= 5) {
    groupApi = newId();
    Event g = start(groupApi, EventType::kGroupApi, -1, 0);
    g.groupDepth = 1;
    events.push_back(g);
    events.push_back(record(groupApi, ncclProfilerGroupStartApiStop, 0));
    api = newId();
    Event a = start(api, coll ? EventType::kCollApi : EventType::kP2pApi, groupApi, 0);
    a.func = opDescr.func;
    a.count = opDescr.count;
    a.datatype = opDescr.datatype;
    a.rootOrPeer = opDescr.rootOrPeer;
    a.userTag = opDescr.userTag;
    events.push_back(a);
    events.push_back(record(groupApi, ncclProfilerGroupEndApiStart, 0));
    const int launch = newId();
    events.push_back(start(launch, EventType::kKernelLaunch, groupApi, 0));
    events.push_back(stop(launch, 0));
  }
  const int group = newId();
  events.push_back(start(group, EventType::kGroup, -1, 0));
  const int op = newId();
  Event o = opDescr;
  o.kind = EventKind::kStart;
  o.id = op;
  o.type = opType;
  o.parent = version_ >= 5 ? api : group;
  o.thread = 0;
  o.commHash = commHash_;
  o.rank = rank_;
  events.push_back(o);
  events.push_back(stop(op, 0));  // "enqueued": the proxy ops are posted
  events.push_back(stop(group, 0));
  if (version_ >= 5) {
    events.push_back(stop(groupApi, 0));
    events.push_back(stop(api, 0));  // the API call returns after the group ended
  }
  return op;
}

void StreamBuilder::phaseEvents(std::vector<Event>& ev, int kernel, int channel, uint64_t beginNs,
                                uint64_t syncNs, uint64_t endNs) {
  // BEGIN, AFTER_OPEN, BEFORE_CLOSE, END; phases of zero length are left out.
  const uint64_t ts[4] = {beginNs, beginNs + syncNs, endNs - 300, endNs};
  static const char* const kNames[3] = {"initial_sync", "compute", "final_sync"};
  for (uint8_t i = 0; i < 3; ++i) {
    if (ts[i] == ts[i + 1]) {
      continue;
    }
    const int phase = newId();
    Event p = start(phase, EventType::kKernelPhase, kernel, 1);
    p.channel = static_cast<uint8_t>(channel);
    p.phaseId = i;
    p.func = kNames[i];  // the descriptor's phaseName
    p.pTimer = ts[i];
    ev.push_back(p);
    ev.push_back(record(phase, ncclProfilerKernelPhaseStop, 1, ts[i + 1]));
    ev.push_back(stop(phase, 1));
  }
}

void StreamBuilder::progressEvents(int opId, uint8_t nChannels, int nSteps, bool network,
                                   const std::set<int>& neverStop, const std::set<int>& neverStart,
                                   int peer, const std::vector<uint64_t>& syncNs) {
  const bool kernelCh = version_ >= 3;
  std::vector<std::vector<Event>> perChannel(nChannels);
  for (int ch = 0; ch < nChannels; ++ch) {
    auto& ev = perChannel[static_cast<size_t>(ch)];
    if (neverStart.count(ch) != 0) {
      continue;
    }
    const bool hangs = neverStop.count(ch) != 0;
    int sendOp = -1;
    int recvOp = -1;
    if (network) {
      sendOp = newId();
      Event s = start(sendOp, EventType::kProxyOp, opId, 1);
      s.channel = static_cast<uint8_t>(ch);
      s.isSend = 1;
      s.nSteps = nSteps;
      s.rootOrPeer = peer;
      ev.push_back(s);
      recvOp = newId();
      Event r = start(recvOp, EventType::kProxyOp, opId, 1);
      r.channel = static_cast<uint8_t>(ch);
      r.isSend = 0;
      r.nSteps = nSteps;
      r.rootOrPeer = peer;
      ev.push_back(r);
      ev.push_back(record(
          sendOp, version_ >= 4 ? ncclProfilerProxyOpInProgress_v4 : ncclProfilerProxyOpSendPosted,
          1));
    }
    int kernel = -1;
    if (kernelCh) {
      kernel = newId();
      Event k = start(kernel, EventType::kKernelCh, opId, 1);
      k.channel = static_cast<uint8_t>(ch);
      k.pTimer = gpuNs_ + static_cast<uint64_t>(ch) * 100;
      ev.push_back(k);
    }
    if (network) {
      for (int step = 0; step < nSteps; ++step) {
        const int s = newId();
        Event st = start(s, EventType::kProxyStep, sendOp, 1);
        st.step = step;
        ev.push_back(st);
        ev.push_back(record(s, ncclProfilerProxyStepSendGPUWait, 1));
        if (version_ >= 4) {
          ev.push_back(record(s, ncclProfilerProxyStepSendPeerWait_v4, 1));
        }
        ev.push_back(record(s, ncclProfilerProxyStepSendWait, 1));
        if (version_ >= 3) {
          const int net = newId();
          ev.push_back(start(net, EventType::kNetPlugin, s, 1));
          ev.push_back(record(net, ncclProfilerNetPluginUpdate, 1));
          ev.push_back(stop(net, 1));
        }
        ev.push_back(stop(s, 1));

        const int r = newId();
        Event rt = start(r, EventType::kProxyStep, recvOp, 1);
        rt.step = step;
        ev.push_back(rt);
        ev.push_back(record(r, ncclProfilerProxyStepRecvWait, 1));
        if (hangs && step == nSteps - 1) {
          break;  // the last receive never arrives
        }
        ev.push_back(record(r, ncclProfilerProxyStepRecvFlushWait, 1));
        ev.push_back(record(r, ncclProfilerProxyStepRecvGPUWait, 1));
        ev.push_back(stop(r, 1));
      }
    }
    if (kernelCh && !hangs) {
      const uint64_t stopNs = gpuNs_ + 50000 + static_cast<uint64_t>(ch);
      if (version_ >= 7) {
        const auto c = static_cast<size_t>(ch);
        phaseEvents(ev, kernel, ch, gpuNs_ + static_cast<uint64_t>(ch) * 100,
                    c < syncNs.size() ? syncNs[c] : 2000 + 100 * c, stopNs);
      }
      if (version_ >= 4) {
        ev.push_back(record(kernel, ncclProfilerKernelChStop, 1, stopNs));
      }
      ev.push_back(stop(kernel, 1));
    }
    if (network) {
      ev.push_back(stop(sendOp, 1));
      if (!hangs) {
        ev.push_back(stop(recvOp, 1));
      }
    }
  }
  gpuNs_ += 1000000;
  // The progress thread polls the channels in turn: interleave them.
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (auto& ev : perChannel) {
      if (i < ev.size()) {
        events.push_back(ev[i]);
        any = true;
      }
    }
    if (!any) {
      break;
    }
  }
}

int StreamBuilder::collective(const CollSpec& spec) {
  Event d;
  d.seqNumber = spec.seqNumber;
  d.func = spec.func;
  d.count = spec.count;
  d.rootOrPeer = spec.root;
  d.nChannels = spec.nChannels;
  d.userTag = spec.userTag;
  d.isSymColl = spec.symmetric;
  const int op = userEvents(EventType::kColl, d);
  if (spec.proxyCtrl) {
    const int ctrl = newId();
    events.push_back(start(ctrl, EventType::kProxyCtrl, -1, 1));
    events.push_back(record(ctrl, ncclProfilerProxyCtrlAppend, 1));
    events.push_back(record(ctrl, ncclProfilerProxyCtrlAppendEnd, 1));
    events.push_back(stop(ctrl, 1));
  }
  progressEvents(op, spec.nChannels, spec.nSteps, spec.network, spec.neverStop, spec.neverStart, 1,
                 spec.syncNs);
  return op;
}

int StreamBuilder::p2p(const P2pSpec& spec) {
  Event d;
  d.func = spec.func;
  d.count = spec.count;
  d.rootOrPeer = spec.peer;
  d.nChannels = spec.nChannels;
  d.userTag = spec.userTag;
  const int op = userEvents(EventType::kP2p, d);
  progressEvents(op, spec.nChannels, spec.nSteps, true, {}, {}, spec.peer, {});
  return op;
}

}  // namespace resilient::test
