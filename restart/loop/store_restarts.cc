#include "restart/loop/store_restarts.h"

#include <utility>

namespace resilient::restart {

StoreRestarts::StoreRestarts(std::function<void()> restore) : restore_(std::move(restore)) {
  thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

StoreRestarts::~StoreRestarts() {
  stop();
}

void StoreRestarts::stop() {
  thread_.request_stop();
  if (thread_.joinable()) {
    thread_.join();
  }
}

void StoreRestarts::noteRestart() noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++noted_;
  }
  changed_.notify_all();
}

uint64_t StoreRestarts::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return noted_;
}

void StoreRestarts::run(const std::stop_token& stop) {
  uint64_t restored = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!changed_.wait(lock, stop, [&] { return noted_ != restored; })) {
        return;  // stopped
      }
      restored = noted_;
    }
    restore_();  // noexcept by contract; a restart meanwhile runs it again
  }
}

}  // namespace resilient::restart
