// The production FaultSink: each fault becomes one WARN through NCCL's logger
// (so it is also what ncclGetLastError() returns) and one fault record in the
// blackbox, where the restart library and resilient-inspect find it; then it
// goes to an optional observer (tests).
#pragma once

#include "blackbox/writer.h"
#include "plugin/profiler/hang_detector.h"

namespace resilient::profiler {

class BlackboxFaultSink final : public FaultSink {
 public:
  // `box` and `observer` may be null.
  BlackboxFaultSink(blackbox::Writer* box, FaultSink* observer) : box_(box), observer_(observer) {}
  void report(const HangFault& fault) noexcept override;

 private:
  blackbox::Writer* const box_;
  FaultSink* const observer_;
};

// The blackbox record of a fault (also used by tests).
resilient_blackbox_fault toFaultRecord(const HangFault& fault) noexcept;

}  // namespace resilient::profiler
