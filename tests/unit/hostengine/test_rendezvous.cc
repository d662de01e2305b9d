// The rendezvous protocol: frame checks, the gathered reply, and a server
// with clients in threads that refuses garbage without disturbing the ranks.
#include <sys/socket.h>

#include <cstring>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/file_descriptor.h"
#include "common/net/socket.h"
#include "common/net/socket_address.h"
#include "hostengine/rendezvous.h"

namespace he = resilient::hostengine;
using resilient::FileDescriptor;
using resilient::monotonicNs;
using resilient::resolveAddress;
using resilient::SocketAddress;

namespace {

constexpr uint64_t kToken = 0x1234abcdull;

std::vector<uint8_t> encode(const he::RendezvousHeader& h) {
  std::vector<uint8_t> out(he::kRendezvousHeaderBytes);
  he::encodeRendezvousHeader(h, out.data());
  return out;
}

struct Server {
  std::unique_ptr<he::RendezvousServer> server;
  SocketAddress address;
};

Server startServer(uint32_t world) {
  auto fd = resilient::listenOn("127.0.0.1", 0, {.backlog = 64, .reuseAddress = true});
  REQUIRE(fd.ok());
  auto s = he::RendezvousServer::start(std::move(fd).value(), world, kToken);
  REQUIRE(s.ok());
  Server out;
  out.server = std::move(s).value();
  auto a = resolveAddress("127.0.0.1", out.server->port());
  REQUIRE(a.ok());
  out.address = *a;
  return out;
}

FileDescriptor rawConnection(const SocketAddress& address) {
  auto fd = resilient::connectWithRetry(address, monotonicNs() + 5000000000ull);
  REQUIRE(fd.ok());
  return std::move(fd).value();
}

// True when the server closes `fd` within 5 s.
bool closedByServer(const FileDescriptor& fd) {
  char byte = 0;
  const auto s = resilient::recvAll(fd.get(), &byte, 1, monotonicNs() + 5000000000ull, "a byte");
  return !s.ok() && s.kind() == resilient::ErrorKind::kRemote;
}

}  // namespace

TEST_CASE("rendezvous headers round-trip", "[hostengine][rendezvous]") {
  he::RendezvousHeader h;
  h.type = he::RendezvousFrame::kGather;
  h.token = kToken;
  h.rank = 3;
  h.worldSize = 4;
  h.round = 17;
  h.length = 1000;
  const auto bytes = encode(h);
  he::RendezvousHeader back;
  REQUIRE(he::decodeRendezvousHeader(bytes.data(), &back).ok());
  CHECK(back.type == h.type);
  CHECK(back.token == kToken);
  CHECK(back.rank == 3);
  CHECK(back.worldSize == 4);
  CHECK(back.round == 17);
  CHECK(back.length == 1000);
  CHECK(bytes[0] == 'R');  // little endian on the wire, whatever the host
}

TEST_CASE("rendezvous headers with bad fields are refused", "[hostengine][rendezvous]") {
  he::RendezvousHeader good;
  good.type = he::RendezvousFrame::kGather;
  good.worldSize = 4;
  good.rank = 1;
  struct Case {
    const char* what;
    he::RendezvousHeader h;
  };
  std::vector<Case> cases;
  auto with = [&](const char* what, auto change) {
    he::RendezvousHeader h = good;
    change(h);
    cases.push_back({what, h});
  };
  with("magic", [](auto& h) { h.magic = 0x12345678; });
  with("version", [](auto& h) { h.version = 2; });
  with("type 0", [](auto& h) { h.type = static_cast<he::RendezvousFrame>(0); });
  with("type 99", [](auto& h) { h.type = static_cast<he::RendezvousFrame>(99); });
  with("world 0", [](auto& h) { h.worldSize = 0; });
  with("world too big", [](auto& h) { h.worldSize = he::kRendezvousMaxWorld + 1; });
  with("rank", [](auto& h) { h.rank = 4; });
  with("gather length", [](auto& h) { h.length = he::kRendezvousMaxPayload + 1; });
  with("hello payload", [](auto& h) {
    h.type = he::RendezvousFrame::kHello;
    h.length = 1;
  });
  with("abort length", [](auto& h) {
    h.type = he::RendezvousFrame::kAbort;
    h.length = he::kRendezvousMaxAbortText + 1;
  });
  for (const Case& c : cases) {
    CAPTURE(c.what);
    he::RendezvousHeader out;
    const auto bytes = encode(c.h);
    const resilient::Status s = he::decodeRendezvousHeader(bytes.data(), &out);
    CHECK_FALSE(s.ok());
    CHECK(s.kind() == resilient::ErrorKind::kInvalidUsage);
  }
  // Random garbage is refused too.
  uint8_t garbage[he::kRendezvousHeaderBytes];
  for (size_t i = 0; i < sizeof(garbage); ++i) {
    garbage[i] = static_cast<uint8_t>(i * 37 + 11);
  }
  he::RendezvousHeader out;
  CHECK_FALSE(he::decodeRendezvousHeader(garbage, &out).ok());
}

TEST_CASE("gathered replies decode only when well formed", "[hostengine][rendezvous]") {
  const std::vector<std::string> parts{"a", "", std::string(300, 'x')};
  const std::string payload = he::encodeGathered(parts);
  auto back = he::decodeGathered(payload, 3);
  REQUIRE(back.ok());
  CHECK(*back == parts);
  CHECK_FALSE(he::decodeGathered(payload, 4).ok());        // truncated
  CHECK_FALSE(he::decodeGathered(payload + "z", 3).ok());  // stray byte
  CHECK_FALSE(he::decodeGathered(payload.substr(0, payload.size() - 1), 3).ok());
  std::string huge = payload;
  huge[0] = '\xff';  // first length becomes enormous
  huge[3] = '\x7f';
  CHECK_FALSE(he::decodeGathered(huge, 3).ok());
}

TEST_CASE("ranks all-gather through the server", "[hostengine][rendezvous]") {
  const uint32_t world = 5;
  Server s = startServer(world);
  std::vector<std::vector<std::string>> got(world);
  std::vector<resilient::Status> errors(world);
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (uint32_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto c = he::RendezvousClient::connect(
          s.address, {.rank = r, .worldSize = world, .token = kToken, .timeoutMs = 10000});
      if (!c.ok()) {
        errors[r] = c.status();
        return;
      }
      for (int round = 0; round < 3; ++round) {
        auto all = (*c)->allGather("rank" + std::to_string(r) + "/" + std::to_string(round));
        if (!all.ok()) {
          errors[r] = all.status();
          return;
        }
        got[r] = *all;
      }
      errors[r] = (*c)->barrier();
      if (errors[r].ok()) {
        errors[r] = (*c)->finish();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  for (uint32_t r = 0; r < world; ++r) {
    CAPTURE(r, errors[r].toString());
    REQUIRE(errors[r].ok());
    REQUIRE(got[r].size() == world);
    for (uint32_t q = 0; q < world; ++q) {
      CHECK(got[r][q] == "rank" + std::to_string(q) + "/2");
    }
  }
  CHECK(s.server->refused() == 0);
}

TEST_CASE("garbage and wrong jobs are refused while the ranks carry on",
          "[hostengine][rendezvous]") {
  const uint32_t world = 2;
  Server s = startServer(world);

  // Not a rendezvous peer at all.
  FileDescriptor junk = rawConnection(s.address);
  const char text[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  REQUIRE(resilient::sendAll(junk.get(), text, sizeof(text), monotonicNs() + 1000000000ull, "junk")
              .ok());
  CHECK(closedByServer(junk));

  // A valid header from another job (wrong token).
  FileDescriptor other = rawConnection(s.address);
  he::RendezvousHeader hello;
  hello.type = he::RendezvousFrame::kHello;
  hello.token = kToken + 1;
  hello.worldSize = world;
  auto bytes = encode(hello);
  REQUIRE(resilient::sendAll(other.get(), bytes.data(), bytes.size(), monotonicNs() + 1000000000ull,
                             "hello")
              .ok());
  CHECK(closedByServer(other));

  // The wrong world size.
  FileDescriptor wrongWorld = rawConnection(s.address);
  hello.token = kToken;
  hello.worldSize = world + 1;
  bytes = encode(hello);
  REQUIRE(resilient::sendAll(wrongWorld.get(), bytes.data(), bytes.size(),
                             monotonicNs() + 1000000000ull, "hello")
              .ok());
  CHECK(closedByServer(wrongWorld));

  // A frame before HELLO.
  FileDescriptor noHello = rawConnection(s.address);
  he::RendezvousHeader gather;
  gather.type = he::RendezvousFrame::kGather;
  gather.token = kToken;
  gather.worldSize = world;
  bytes = encode(gather);
  REQUIRE(resilient::sendAll(noHello.get(), bytes.data(), bytes.size(),
                             monotonicNs() + 1000000000ull, "gather")
              .ok());
  CHECK(closedByServer(noHello));
  CHECK(s.server->refused() == 4);

  // The real ranks still meet; a second rank 0 is refused.
  std::vector<std::thread> threads;
  threads.reserve(8);
  std::vector<resilient::Status> errors(world);
  for (uint32_t r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto c = he::RendezvousClient::connect(
          s.address, {.rank = r, .worldSize = world, .token = kToken, .timeoutMs = 10000});
      errors[r] = c.ok() ? (*c)->barrier() : c.status();
      if (errors[r].ok()) {
        errors[r] = (*c)->finish();
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  CHECK(errors[0].ok());
  CHECK(errors[1].ok());
}

TEST_CASE("an abort reaches every rank waiting in a round", "[hostengine][rendezvous]") {
  const uint32_t world = 3;
  Server s = startServer(world);
  std::vector<resilient::Status> errors(2);
  std::vector<resilient::Status> later(2);
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (uint32_t r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto c = he::RendezvousClient::connect(
          s.address, {.rank = r, .worldSize = world, .token = kToken, .timeoutMs = 10000});
      errors[r] = c.ok() ? (*c)->barrier() : c.status();
      if (c.ok()) {
        later[r] = (*c)->barrier();
      }
    });
  }
  auto c = he::RendezvousClient::connect(
      s.address, {.rank = 2, .worldSize = world, .token = kToken, .timeoutMs = 10000});
  REQUIRE(c.ok());
  (*c)->abort("boom");
  for (auto& t : threads) {
    t.join();
  }
  for (const auto& e : errors) {
    CAPTURE(e.toString());
    CHECK(e.kind() == resilient::ErrorKind::kRemote);
    CHECK(e.message().find("rank 2 aborted: boom") != std::string::npos);
  }
  // Every later call fails at once with the same reason.
  for (const auto& e : later) {
    CHECK_FALSE(e.ok());
  }
}

TEST_CASE("a rank that vanishes without BYE aborts the others", "[hostengine][rendezvous]") {
  const uint32_t world = 2;
  Server s = startServer(world);
  resilient::Status error;
  std::thread waiter([&] {
    auto c = he::RendezvousClient::connect(
        s.address, {.rank = 0, .worldSize = world, .token = kToken, .timeoutMs = 10000});
    error = c.ok() ? (*c)->barrier() : c.status();
  });
  {
    auto c = he::RendezvousClient::connect(
        s.address, {.rank = 1, .worldSize = world, .token = kToken, .timeoutMs = 10000});
    REQUIRE(c.ok());
  }  // closed without BYE
  waiter.join();
  CAPTURE(error.toString());
  CHECK(error.message().find("rank 1 left the rendezvous without BYE") != std::string::npos);
}

TEST_CASE("a client times out when the others never come", "[hostengine][rendezvous]") {
  Server s = startServer(2);
  auto c = he::RendezvousClient::connect(
      s.address, {.rank = 0, .worldSize = 2, .token = kToken, .timeoutMs = 300});
  REQUIRE(c.ok());
  const uint64_t before = monotonicNs();
  const resilient::Status st = (*c)->barrier();
  CHECK(st.kind() == resilient::ErrorKind::kTimeout);
  CHECK(monotonicNs() - before < 3000000000ull);
}

TEST_CASE("a launched rank fails at once when rank 0's socket refuses it",
          "[hostengine][rendezvous]") {
  // Issue 18 finding 6: when the rank that hosts the rendezvous failed early,
  // the others waited their whole timeout (30 s), though the launcher had
  // opened that socket before any rank started: refused means rank 0 is gone.
  SocketAddress gone;
  {
    auto fd = resilient::listenOn("127.0.0.1", 0, {.backlog = 4, .reuseAddress = true});
    REQUIRE(fd.ok());
    gone = resilient::localAddressOf(fd->get());
  }  // closed: nobody listens there now
  const uint64_t before = monotonicNs();
  auto c =
      he::RendezvousClient::connect(gone, {.rank = 1,
                                           .worldSize = 2,
                                           .token = kToken,
                                           .timeoutMs = 20000,
                                           .serverSocket = he::ServerSocket::kOpenedByLauncher});
  REQUIRE_FALSE(c.ok());
  CHECK(monotonicNs() - before < 2000000000ull);  // not the 20 s timeout
  CHECK(c.status().kind() == resilient::ErrorKind::kRemote);
  CHECK_THAT(c.status().message(), Catch::Contains("rank 0, which serves it, has exited"));

  // A rank 0 started by hand may not listen yet: the others keep trying.
  const uint64_t start = monotonicNs();
  auto retried = he::RendezvousClient::connect(
      gone, {.rank = 1, .worldSize = 2, .token = kToken, .timeoutMs = 300});
  REQUIRE_FALSE(retried.ok());
  CHECK(retried.status().kind() == resilient::ErrorKind::kTimeout);
  CHECK(monotonicNs() - start >= 300000000ull);
}
