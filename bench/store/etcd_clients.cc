#include "bench/store/etcd_clients.h"

#include <pthread.h>

#include <cstdio>
#include <functional>
#include <stdexcept>

namespace resilient::store::bench {
namespace {

constexpr size_t kStackBytes = size_t{256} * 1024;

// A thread with a small stack: thousands of them per process.
pthread_t spawn(std::function<void()> fn) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, kStackBytes);
  auto* heapFn = new std::function<void()>(std::move(fn));
  pthread_t t{};
  const int rc = pthread_create(
      &t, &attr,
      [](void* p) -> void* {
        std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(p));
        (*f)();
        return nullptr;
      },
      heapFn);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    delete heapFn;
    throw std::runtime_error("pthread_create failed (raise ulimit -u?)");
  }
  return t;
}

}  // namespace

struct EtcdClients::Call {
  int rank = 0;
  pthread_t thread{};
  bool started = false;
  uint64_t sendNs = 0;
  uint64_t releaseNs = 0;
  bool ok = false;
  std::string error;
};

EtcdClients::EtcdClients(const std::vector<std::string>& endpoints, int clients, int firstRank)
    : clients_(clients), firstRank_(firstRank) {
  ClientOptions o;
  o.name = defaultClientName();
  // As long as the coordinator waits for arrivals: at 16k ranks the first
  // arrivals wait minutes for the last.
  o.defaultTimeout = Millis(600000);
  o.connectTimeout = Millis(30000);
  o.memberTimeout = Millis(10000);  // a loaded 2-core machine answers slowly
  store_ = std::make_unique<etcd::EtcdStore>(endpoints, o);
}

EtcdClients::~EtcdClients() {
  BarrierTimes ignored;
  awaitReleases(&ignored);
}

void EtcdClients::launch(Call* call) {
  call->started = true;
  call->thread = spawn([this, call] {
    call->sendNs = monotonicNs();
    try {
      BarrierResult r = store_->barrier({name_, generation_, call->rank, worldSize_, true});
      call->ok = r.completed;
    } catch (const std::exception& e) {
      call->ok = false;
      call->error = e.what();
    }
    call->releaseNs = monotonicNs();
  });
}

void EtcdClients::startBarrier(const std::string& name, uint64_t generation, int worldSize,
                               bool holdLast, BarrierTimes* times) {
  name_ = name;
  generation_ = generation;
  worldSize_ = worldSize;
  calls_.clear();
  *times = BarrierTimes{};
  for (int i = 0; i < clients_; ++i) {
    auto c = std::make_unique<Call>();
    c->rank = firstRank_ + i;
    calls_.push_back(std::move(c));
  }
  times->firstSendNs = monotonicNs();
  const size_t n = calls_.size() - (holdLast ? 1 : 0);
  for (size_t i = 0; i < n; ++i) {
    launch(calls_[i].get());
  }
  times->lastSendNs = monotonicNs();
}

void EtcdClients::startHeld(BarrierTimes* times) {
  Call* held = calls_.back().get();
  launch(held);
  times->lastSendNs = monotonicNs();  // refined below from the thread's own stamp
}

void EtcdClients::awaitReleases(BarrierTimes* times) {
  for (auto& c : calls_) {
    if (!c->started) {
      continue;
    }
    pthread_join(c->thread, nullptr);
    c->started = false;
    if (!c->ok) {
      if (times->errors++ == 0) {
        std::fprintf(stderr, "resilient-store-bench: rank %d: %s\n", c->rank, c->error.c_str());
      }
      continue;
    }
    if (times->released == 0 || c->releaseNs < times->firstReleaseNs) {
      times->firstReleaseNs = c->releaseNs;
    }
    times->lastReleaseNs = std::max(times->lastReleaseNs, c->releaseNs);
    times->lastSendNs = std::max(times->lastSendNs, c->sendNs);
    ++times->released;
  }
  calls_.clear();
}

uint64_t EtcdClients::runOps(const std::string& op, int durationMs) {
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> errors{0};
  const uint64_t end = monotonicNs() + static_cast<uint64_t>(durationMs) * 1000000ull;
  std::vector<pthread_t> threads;
  for (int i = 0; i < clients_; ++i) {
    const std::string key = "bench/" + std::to_string(firstRank_ + i);
    const std::string counter = "bench/counter/" + std::to_string(firstRank_ + i);
    threads.push_back(spawn([&, key, counter] {
      while (monotonicNs() < end) {
        try {
          if (op == "set") {
            store_->set(key, "0123456789abcdef");
          } else if (op == "get") {
            store_->get(key);
          } else {
            store_->add(counter, 1);
          }
          ++done;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    }));
  }
  for (pthread_t t : threads) {
    pthread_join(t, nullptr);
  }
  if (errors > 0) {
    throw std::runtime_error(std::to_string(errors.load()) + " etcd operations failed");
  }
  return done.load();
}

}  // namespace resilient::store::bench
