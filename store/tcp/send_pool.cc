#include "store/tcp/send_pool.h"

#include <pthread.h>

namespace resilient::store::tcp {

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

void SendPool::run(const std::function<void(size_t)>& fn) {
  if (threads_.empty()) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    remaining_ = threads_.size();
    ++generation_;
  }
  start_.notify_all();
  fn(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return remaining_ == 0; });
  fn_ = nullptr;
}

void SendPool::helperLoop(size_t index) {
  uint64_t seen = 0;
  for (;;) {
    const std::function<void(size_t)>* fn = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) {
        return;
      }
      seen = generation_;
      fn = fn_;
    }
    (*fn)(index);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--remaining_ == 0) {
        done_.notify_one();
      }
    }
  }
}

}  // namespace resilient::store::tcp
