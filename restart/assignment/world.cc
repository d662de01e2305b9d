#include "resilient/restart/world.hpp"

#include <algorithm>
#include <stdexcept>

namespace resilient::restart {

const char* modeName(Mode mode) noexcept {
  switch (mode) {
    case Mode::kActive: return "active";
    case Mode::kInactive: return "inactive";
    case Mode::kTerminated: return "terminated";
    case Mode::kInitialized: return "initialized";
  }
  return "unknown";
}

World::World(int initialWorldSize) {
  if (initialWorldSize < 1) {
    throw std::invalid_argument("a world needs at least one rank, not " +
                                std::to_string(initialWorldSize));
  }
  slots_.resize(static_cast<size_t>(initialWorldSize));
  for (int r = 0; r < initialWorldSize; ++r) {
    slots_[static_cast<size_t>(r)] = RankSlot{r, Mode::kActive, r};
  }
}

int World::worldSize() const noexcept {
  return static_cast<int>(std::count_if(
      slots_.begin(), slots_.end(), [](const RankSlot& s) { return s.mode != Mode::kTerminated; }));
}

int World::activeWorldSize() const noexcept {
  return static_cast<int>(std::count_if(slots_.begin(), slots_.end(),
                                        [](const RankSlot& s) { return s.mode == Mode::kActive; }));
}

void World::throwOutOfRange(int initialRank) const {
  throw std::out_of_range("initial rank " + std::to_string(initialRank) + " outside [0, " +
                          std::to_string(initialWorldSize()) + ")");
}

void World::terminate(int initialRank) {
  RankSlot& s = at(initialRank);
  s = RankSlot{-1, Mode::kTerminated, -1};
}

void World::addSpares(int count) {
  if (count < 0) {
    throw std::invalid_argument("cannot add " + std::to_string(count) + " spares to a world");
  }
  int next = worldSize();
  for (int i = 0; i < count; ++i) {
    slots_.push_back(RankSlot{next++, Mode::kInactive, -1});
  }
}

std::vector<int> World::liveByRank() const {
  // A stable counting sort by rank: live ranks lie in [0, initialWorldSize)
  // (a policy may briefly leave one outside; then a comparison sort).
  const size_t n = slots_.size();
  std::vector<int> live;
  live.reserve(n);
  std::vector<int> start(n + 1, 0);
  bool inRange = true;
  for (const RankSlot& s : slots_) {
    if (s.mode == Mode::kTerminated) {
      continue;
    }
    if (s.rank < 0 || static_cast<size_t>(s.rank) >= n) {
      inRange = false;
      break;
    }
    ++start[static_cast<size_t>(s.rank) + 1];
  }
  if (inRange) {
    for (size_t r = 0; r < n; ++r) {
      start[r + 1] += start[r];
    }
    live.resize(static_cast<size_t>(start[n]));
    for (size_t i = 0; i < n; ++i) {
      const RankSlot& s = slots_[i];
      if (s.mode != Mode::kTerminated) {
        live[static_cast<size_t>(start[static_cast<size_t>(s.rank)]++)] = static_cast<int>(i);
      }
    }
    return live;
  }
  for (size_t i = 0; i < n; ++i) {
    if (slots_[i].mode != Mode::kTerminated) {
      live.push_back(static_cast<int>(i));
    }
  }
  std::stable_sort(live.begin(), live.end(), [this](int a, int b) {
    return slots_[static_cast<size_t>(a)].rank < slots_[static_cast<size_t>(b)].rank;
  });
  return live;
}

void World::renumberActive() {
  int next = 0;
  for (const int i : liveByRank()) {
    RankSlot& s = slots_[static_cast<size_t>(i)];
    s.activeRank = s.mode == Mode::kActive ? next++ : -1;
  }
}

std::string World::inconsistency() const {
  // Messages are built only on failure: this runs on every assignment.
  const int live = worldSize();
  auto who = [](int i) { return "initial rank " + std::to_string(i); };
  std::vector<int> owner(slots_.size(), -1);
  for (int i = 0; i < initialWorldSize(); ++i) {
    const RankSlot& s = slots_[static_cast<size_t>(i)];
    if (s.mode == Mode::kTerminated) {
      if (s.rank != -1 || s.activeRank != -1) {
        return who(i) + " is terminated but still holds rank " + std::to_string(s.rank);
      }
      continue;
    }
    if (s.rank < 0 || s.rank >= live) {
      return who(i) + " holds rank " + std::to_string(s.rank) + " outside [0, " +
             std::to_string(live) + ")";
    }
    if (owner[static_cast<size_t>(s.rank)] != -1) {
      return who(i) + " and initial rank " + std::to_string(owner[static_cast<size_t>(s.rank)]) +
             " both hold rank " + std::to_string(s.rank);
    }
    owner[static_cast<size_t>(s.rank)] = i;
  }
  // owner[] now lists the live initial ranks in rank order.
  int expected = 0;
  for (int r = 0; r < live; ++r) {
    const int i = owner[static_cast<size_t>(r)];
    const RankSlot& s = slots_[static_cast<size_t>(i)];
    const int want = s.mode == Mode::kActive ? expected++ : -1;
    if (s.activeRank != want) {
      return who(i) + " (" + modeName(s.mode) + ") has active rank " +
             std::to_string(s.activeRank) + ", expected " + std::to_string(want);
    }
  }
  return {};
}

bool operator==(const RankSlot& a, const RankSlot& b) {
  return a.rank == b.rank && a.mode == b.mode && a.activeRank == b.activeRank;
}

bool operator==(const World& a, const World& b) {
  return a.slots_ == b.slots_;
}

}  // namespace resilient::restart
