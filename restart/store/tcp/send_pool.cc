#include "restart/store/tcp/send_pool.h"

#include <pthread.h>

namespace resilient::store::tcp {
namespace {

// Slice `part` of `parts` over [0, n).
std::pair<size_t, size_t> slice(size_t n, size_t parts, size_t part) {
  return {n * part / parts, n * (part + 1) / parts};
}

}  // namespace

SendPool::SendPool(int helpers) {
  for (int i = 0; i < helpers; ++i) {
    threads_.emplace_back([this, i] {
      pthread_setname_np(pthread_self(), "store-send");
      helperLoop(static_cast<size_t>(i) + 1);
    });
  }
}

SendPool::~SendPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_.notify_all();
  for (auto& t : threads_) {
    t.join();
  }
}

void SendPool::run(size_t n, const std::function<void(size_t, size_t)>& fn) {
  const size_t parts = threads_.size() + 1;
  if (threads_.empty() || n < parts) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    remaining_ = threads_.size();
    ++generation_;
  }
  start_.notify_all();
  const auto [begin, end] = slice(n, parts, 0);
  fn(begin, end);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return remaining_ == 0; });
  fn_ = nullptr;
}

void SendPool::helperLoop(size_t index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* fn = nullptr;
    size_t n = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) {
        return;
      }
      seen = generation_;
      fn = fn_;
      n = n_;
    }
    const auto [begin, end] = slice(n, threads_.size() + 1, index);
    (*fn)(begin, end);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--remaining_ == 0) {
        done_.notify_one();
      }
    }
  }
}

}  // namespace resilient::store::tcp
