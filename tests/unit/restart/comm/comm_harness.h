// Threads as the ranks of one iteration: each gets a State, a
// StoreRendezvous over one shared MemoryStore (narrowed to "iter/<i>/") and
// a CommunicatorSetup, runs a function and hands back what it threw.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <stdexcept>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "resilient/restart/communicator.hpp"
#include "resilient/restart/errors.hpp"
#include "resilient/restart/state.hpp"
#include "restart/comm/store_rendezvous.h"
#include "store/memory_store.h"
#include "store/prefix_view.h"

namespace resilient::restart::commtest {

struct RankContext {
  State state;
  std::unique_ptr<comm::StoreRendezvous> rendezvous;
  // What the factory recorded for the timeline ("phase: detail").
  std::shared_ptr<std::vector<std::string>> records = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<std::mutex> recordMutex = std::make_shared<std::mutex>();
  // What the setups hand the factory for its abort (none: empty).
  std::function<void(std::function<void()>)> abortWith;

  CommunicatorSetup setup(const std::string& name, std::chrono::milliseconds timeout,
                          CommunicatorPtr previous = nullptr, std::vector<int> removed = {},
                          bool onlyRemovals = false, std::vector<int> joined = {}) const {
    return CommunicatorSetup{state,
                             *rendezvous,
                             name,
                             std::move(previous),
                             std::move(removed),
                             onlyRemovals,
                             timeout,
                             std::move(joined),
                             [records = records, lock = recordMutex](const std::string& phase,
                                                                     const std::string& detail) {
                               std::lock_guard<std::mutex> guard(*lock);
                               records->push_back(phase + ": " + detail);
                             },
                             abortWith};
  }
};

class Iteration {
 public:
  Iteration(std::shared_ptr<store::Store> store, int iteration, int members)
      : store_(std::move(store)), iteration_(iteration), members_(members) {}

  RankContext context(int rank) const {
    RankContext c;
    c.state.rank = rank;
    c.state.worldSize = members_;
    c.state.activeRank = rank;
    c.state.activeWorldSize = members_;
    c.state.iteration = iteration_;
    c.state.mode = Mode::kActive;
    auto view =
        std::make_shared<store::PrefixView>(store_, "iter/" + std::to_string(iteration_) + "/");
    c.rendezvous = std::make_unique<comm::StoreRendezvous>(view, rank, members_);
    return c;
  }

  // Runs fn(rank, context) on `members` threads; the exceptions by rank.
  std::vector<std::exception_ptr> run(const std::function<void(int, RankContext&)>& fn) const {
    std::vector<std::exception_ptr> errors(static_cast<size_t>(members_));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(members_));
    for (int r = 0; r < members_; ++r) {
      threads.emplace_back([&, r] {
        try {
          RankContext c = context(r);
          fn(r, c);
        } catch (...) {
          errors[static_cast<size_t>(r)] = std::current_exception();
        }
      });
    }
    for (auto& t : threads) {
      t.join();
    }
    return errors;
  }

  int members() const noexcept { return members_; }

 private:
  std::shared_ptr<store::Store> store_;
  int iteration_;
  int members_;
};

// Catch2's assertions are not thread-safe: rank threads check with this and
// the main thread REQUIREs that no rank threw.
inline void expect(bool ok, const std::string& what) {
  if (!ok) {
    throw std::runtime_error("expectation failed: " + what);
  }
}

inline std::string messageOf(const std::exception_ptr& e) {
  if (!e) {
    return {};
  }
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "non-standard exception";
  }
}

}  // namespace resilient::restart::commtest
