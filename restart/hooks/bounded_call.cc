#include "restart/hooks/bounded_call.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

#include "resilient/restart/errors.hpp"

namespace resilient::restart::detail {
namespace {

std::atomic<int> gOverrunning{0};

// What the caller and the thread share; the last of the two to let go frees it.
struct Call {
  std::function<void()> fn;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  bool abandoned = false;  // the caller gave up waiting
  std::exception_ptr error;
};

void runCall(const std::shared_ptr<Call>& call) {
  std::exception_ptr error;
  try {
    call->fn();
  } catch (...) {
    error = std::current_exception();
  }
  std::lock_guard<std::mutex> lock(call->mutex);
  call->error = std::move(error);
  call->done = true;
  if (call->abandoned) {
    gOverrunning.fetch_sub(1, std::memory_order_relaxed);
  }
  call->finished.notify_all();
}

}  // namespace

void runBounded(std::chrono::milliseconds timeout, const std::string& what,
                const std::string& threadName, std::function<void()> fn) {
  auto call = std::make_shared<Call>();
  call->fn = std::move(fn);
  std::thread thread([call, name = threadName.substr(0, 15)] {
    pthread_setname_np(pthread_self(), name.c_str());
    runCall(call);
  });
  std::unique_lock<std::mutex> lock(call->mutex);
  if (!call->finished.wait_for(lock, timeout, [&] { return call->done; })) {
    call->abandoned = true;
    gOverrunning.fetch_add(1, std::memory_order_relaxed);
    lock.unlock();
    thread.detach();
    throw TimeoutError(what + " did not finish within " + std::to_string(timeout.count()) +
                       " ms (left running on its own thread: it cannot be cancelled)");
  }
  std::exception_ptr error = call->error;
  lock.unlock();
  thread.join();
  if (error) {
    std::rethrow_exception(error);
  }
}

std::vector<size_t> runAllBounded(std::chrono::milliseconds timeout, const std::string& threadName,
                                  std::vector<std::function<void()>> fns) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::shared_ptr<Call>> calls;
  std::vector<std::thread> threads;
  for (auto& fn : fns) {
    auto call = std::make_shared<Call>();
    call->fn = std::move(fn);
    calls.push_back(call);
    try {
      threads.emplace_back([call, name = threadName.substr(0, 15)] {
        pthread_setname_np(pthread_self(), name.c_str());
        runCall(call);
      });
    } catch (const std::system_error&) {  // no thread to be had: on this one
      runCall(call);
      threads.emplace_back();
    }
  }
  std::vector<size_t> overran;
  for (size_t i = 0; i < calls.size(); ++i) {
    Call& call = *calls[i];
    std::unique_lock<std::mutex> lock(call.mutex);
    if (!call.finished.wait_until(lock, deadline, [&] { return call.done; })) {
      call.abandoned = true;
      gOverrunning.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      threads[i].detach();
      overran.push_back(i);
      continue;
    }
    lock.unlock();
    if (threads[i].joinable()) {
      threads[i].join();
    }
  }
  return overran;
}

int overrunningThreads() noexcept {
  return gOverrunning.load(std::memory_order_relaxed);
}

}  // namespace resilient::restart::detail
