#include "plugin/profiler/context.h"

namespace resilient::profiler {

Context::Context(uint32_t idx, const CommIdentity& id, uint32_t cap, pid_t ourPid)
    : index(idx),
      abiVersion(id.abiVersion),
      pid(ourPid),
      kernelEvents(id.abiVersion >= 3),
      exactChannels(id.abiVersion >= 4),
      name(id.name),
      nranks(id.nranks),
      nNodes(id.nNodes),
      commHash(id.commHash),
      rank(id.rank),
      capacity(cap),
      slots(new OpSlot[cap]),
      pool(cap),
      phases(new PhaseSlot[kPhaseSlots]),
      phasePool(kPhaseSlots) {}

}  // namespace resilient::profiler
