// A FaultSink that keeps every fault, for assertions.
#pragma once

#include <mutex>
#include <vector>

#include "plugin/profiler/hang_detector.h"

namespace resilient::test {

class CaptureSink final : public profiler::FaultSink {
 public:
  void report(const profiler::HangFault& fault) noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    faults_.push_back(fault);
  }
  std::vector<profiler::HangFault> faults() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return faults_;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return faults_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<profiler::HangFault> faults_;
};

}  // namespace resilient::test
