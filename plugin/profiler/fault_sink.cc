#include "plugin/profiler/fault_sink.h"

#include "common/log.h"

namespace resilient::profiler {

resilient_blackbox_fault toFaultRecord(const HangFault& fault) noexcept {
  resilient_blackbox_fault r{};
  r.faultClass = fault.faultClass;
  r.commId = fault.commHash;
  r.remote = 0;
  blackbox::copyText(r.text, fault.text);
  r.rank = fault.rank;
  r.opKind = fault.op.kind;
  r.collIndex = fault.op.collIndex;
  r.seqNumber = fault.op.seqNumber;
  r.stuckChannels = fault.stuckChannels;
  r.stalledMs = fault.stalledNs / 1000000;
  blackbox::copyText(r.op, fault.op.func);
  return r;
}

void BlackboxFaultSink::report(const HangFault& fault) noexcept {
  RES_WARN(NCCL_PROFILE, "%s", fault.text.c_str());
  if (box_ != nullptr) {
    box_->recordFault(toFaultRecord(fault));
  }
  if (observer_ != nullptr) {
    observer_->report(fault);
  }
}

}  // namespace resilient::profiler
