// EventLoop: tags come back with their events, interest can change, a
// removed or closed descriptor is silent, wake() ends a wait from another
// thread and is not reported as an event.
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "common/clock.h"
#include "common/file_descriptor.h"
#include "common/net/event_loop.h"

using namespace resilient;

namespace {

struct Pair {
  FileDescriptor a;
  FileDescriptor b;
};

Pair socketPair() {
  int fds[2] = {-1, -1};
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) == 0);
  return {FileDescriptor(fds[0]), FileDescriptor(fds[1])};
}

struct Seen {
  void* tag;
  uint32_t events;
};

std::vector<Seen> waitOnce(EventLoop& loop, int timeoutMs) {
  std::vector<Seen> seen;
  const Result<int> n = loop.wait(timeoutMs, [&](void* tag, uint32_t events) {
    seen.push_back({tag, events});
  });
  REQUIRE(n.ok());
  CHECK(*n == static_cast<int>(seen.size()));
  return seen;
}

}  // namespace

TEST_CASE("the event loop reports readiness with the descriptor's tag", "[eventloop]") {
  EventLoop loop;
  REQUIRE(loop.status().ok());
  Pair p = socketPair();
  int tag = 0;
  REQUIRE(loop.add(p.a.get(), EventLoop::kReadable, &tag).ok());
  CHECK(waitOnce(loop, 0).empty());  // nothing to read yet

  REQUIRE(::write(p.b.get(), "x", 1) == 1);
  std::vector<Seen> seen = waitOnce(loop, 1000);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].tag == &tag);
  CHECK((seen[0].events & EventLoop::kReadable) != 0);

  // Level-triggered: still readable until drained.
  CHECK(waitOnce(loop, 0).size() == 1);
  char c = 0;
  REQUIRE(::read(p.a.get(), &c, 1) == 1);
  CHECK(waitOnce(loop, 0).empty());
}

TEST_CASE("interest can change and removed descriptors are silent", "[eventloop]") {
  EventLoop loop;
  Pair p = socketPair();
  int tag = 0;
  REQUIRE(loop.add(p.a.get(), EventLoop::kReadable, &tag).ok());
  CHECK(waitOnce(loop, 0).empty());
  REQUIRE(loop.modify(p.a.get(), EventLoop::kReadable | EventLoop::kWritable, &tag).ok());
  std::vector<Seen> seen = waitOnce(loop, 1000);
  REQUIRE(seen.size() == 1);
  CHECK((seen[0].events & EventLoop::kWritable) != 0);

  loop.remove(p.a.get());
  CHECK(waitOnce(loop, 0).empty());
  CHECK_FALSE(loop.modify(p.a.get(), EventLoop::kReadable, &tag).ok());  // not registered
}

TEST_CASE("a closed peer is reported as readable or hung up", "[eventloop]") {
  EventLoop loop;
  Pair p = socketPair();
  int tag = 0;
  REQUIRE(loop.add(p.a.get(), EventLoop::kReadable, &tag).ok());
  p.b.reset();
  std::vector<Seen> seen = waitOnce(loop, 1000);
  REQUIRE(seen.size() == 1);
  CHECK((seen[0].events & (EventLoop::kReadable | EventLoop::kErrorOrHangup)) != 0);
}

TEST_CASE("wake() from another thread ends a wait without an event", "[eventloop]") {
  EventLoop loop;
  const uint64_t start = monotonicNs();
  std::thread waker([&loop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    loop.wake();
  });
  const std::vector<Seen> seen = waitOnce(loop, 10000);
  waker.join();
  CHECK(seen.empty());
  CHECK(monotonicNs() - start < 5'000'000'000ull);  // woken, not timed out (10 s)

  // A wake before the wait ends the next wait; the one after that times out.
  loop.wake();
  CHECK(waitOnce(loop, 10000).empty());
  const uint64_t before = monotonicNs();
  CHECK(waitOnce(loop, 30).empty());
  CHECK(monotonicNs() - before >= 20'000'000ull);
}

TEST_CASE("edge-triggered descriptors are reported once per change", "[eventloop]") {
  EventLoop loop;
  Pair p = socketPair();
  int tag = 0;
  REQUIRE(loop.add(p.a.get(), EventLoop::kReadable | EventLoop::kEdgeTriggered, &tag).ok());
  REQUIRE(::write(p.b.get(), "x", 1) == 1);
  CHECK(waitOnce(loop, 1000).size() == 1);
  CHECK(waitOnce(loop, 0).empty());  // not drained, but no new edge
  REQUIRE(::write(p.b.get(), "y", 1) == 1);
  CHECK(waitOnce(loop, 1000).size() == 1);
}
