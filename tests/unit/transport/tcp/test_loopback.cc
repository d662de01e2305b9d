#include <netinet/in.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin/transport/tcp/comm.h"
#include "plugin/transport/tcp/tcp_transport.h"
#include "tests/support/transport_pair.h"
#include "tests/unit/transport/tcp/tcp_test_util.h"

using namespace resilient;
using namespace resilient::transport::tcp;
using resilient::test::TransportPair;

TEST_CASE("messages of 0 B to 64 MiB cross a loopback connection intact",
          "[transport][tcp][loopback]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  SECTION("defaults") {}
  SECTION("one data socket, one thread") {
    o.nSocks = 1;
    o.nThreads = 1;
  }
  SECTION("four data sockets, two threads, small chunks, no inline") {
    o.nSocks = 4;
    o.nThreads = 2;
    o.chunkBytes = kMinChunkBytes;
    o.inlineBytes = 0;
  }
  SECTION("three data sockets, no helper thread (test() moves the bytes), small chunks") {
    o.nSocks = 3;
    o.nThreads = 0;
    o.chunkBytes = 64u << 10;
  }
  CAPTURE(o.nSocks, o.nThreads, o.chunkBytes, o.inlineBytes);
  TcpTransport sender(o);
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).toString() == "ok");

  std::vector<size_t> sizes = {0, 1, 8};
  for (size_t s = 16; s <= (size_t{64} << 20); s *= 4) {  // 16 B ... 64 MiB
    sizes.push_back(s);
  }
  // Around the inline threshold and the chunk size.
  for (size_t s : {o.inlineBytes, o.inlineBytes + 1, size_t{o.chunkBytes} * 3 + 5}) {
    sizes.push_back(s);
  }
  REQUIRE(sizes[sizes.size() - 4] == (size_t{64} << 20));
  uint32_t seed = 1;
  for (const size_t size : sizes) {
    REQUIRE(test::roundTrip(pair, size, seed++).toString() == "ok");
  }
  uint64_t sent = 0;
  uint64_t received = 0;
  REQUIRE(pair.sendComm->bytesMoved(&sent));
  REQUIRE(pair.recvComm->bytesMoved(&received));
  const uint64_t total = std::accumulate(sizes.begin(), sizes.end(), uint64_t{0});
  CHECK(sent == total);
  CHECK(received == total);
}

TEST_CASE("IPv6 loopback works when ::1 is configured", "[transport][tcp][loopback]") {
  TcpTransport sender(test::loopbackOptions(AF_INET6));
  TcpTransport receiver(test::loopbackOptions(AF_INET6));
  int ndev = 0;
  if (!receiver.devices(&ndev).ok() || ndev == 0) {
    WARN("no IPv6 loopback address; skipped");
    return;
  }
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).toString() == "ok");
  transport::Endpoint local;
  transport::Endpoint peer;
  REQUIRE(pair.sendComm->endpoints(&local, &peer));
  CHECK_THAT(std::string(peer.text), Catch::StartsWith("[::1]:"));
  REQUIRE(test::roundTrip(pair, 100, 1).toString() == "ok");
  REQUIRE(test::roundTrip(pair, 3u << 20, 2).toString() == "ok");
}

TEST_CASE("endpoints name both ends of a connection", "[transport][tcp][loopback]") {
  TcpTransport sender(test::loopbackOptions(AF_INET));
  TcpTransport receiver(test::loopbackOptions(AF_INET));
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).toString() == "ok");
  transport::Endpoint sLocal;
  transport::Endpoint sPeer;
  transport::Endpoint rLocal;
  transport::Endpoint rPeer;
  REQUIRE(pair.sendComm->endpoints(&sLocal, &sPeer));
  REQUIRE(pair.recvComm->endpoints(&rLocal, &rPeer));
  CHECK_THAT(std::string(sLocal.text), Catch::StartsWith("127.0.0.1:"));
  CHECK(std::string(sLocal.text) == rPeer.text);
  CHECK(std::string(sPeer.text) == rLocal.text);
  uint64_t bytes = 1;
  REQUIRE(pair.sendComm->bytesMoved(&bytes));
  CHECK(bytes == 0);
}

TEST_CASE("a grouped receive of 8 messages matches tags in any order",
          "[transport][tcp][loopback]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.nSocks = 3;
  TcpTransport sender(o);
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).toString() == "ok");

  std::mt19937 rng(12345);
  for (int round = 0; round < 4; ++round) {
    CAPTURE(round);
    // Mixed sizes: inline, zero, striped.
    const size_t msgSize[8] = {0, 1, 1000, 64u << 10, (64u << 10) + 1, 700000, 3u << 20, 77};
    std::vector<std::vector<uint8_t>> src(8);
    std::vector<std::vector<uint8_t>> dst(8);
    std::byte* data[8];
    size_t sizes[8];
    int tags[8];
    for (int i = 0; i < 8; ++i) {
      src[i].resize(msgSize[i]);
      test::fillPattern(&src[i], static_cast<uint32_t>(100 * round + i));
      dst[i].assign(msgSize[i] + 16, 0);
      data[i] = test::asBytes(dst[i].data());
      sizes[i] = dst[i].size();
      tags[i] = 1000 + i;
    }
    transport::Request* rreq = nullptr;
    REQUIRE(pair.recvComm->irecv(8, data, sizes, tags, nullptr, nullptr, &rreq).ok());
    REQUIRE(rreq != nullptr);
    std::vector<int> order(8);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<transport::Request*> sreqs;
    for (const int i : order) {
      transport::Request* sreq = nullptr;
      REQUIRE(
          pair.sendComm
              ->isend(test::asBytes(src[i].data()), src[i].size(), tags[i], nullptr, nullptr, &sreq)
              .ok());
      REQUIRE(sreq != nullptr);
      sreqs.push_back(sreq);
    }
    Status sendStatus;
    std::thread senderThread([&] {
      for (transport::Request* sreq : sreqs) {
        if (sendStatus.ok()) {
          sendStatus = test::waitRequest(sreq);
        }
      }
    });
    int got[8] = {};
    const Status s = test::waitRequest(rreq, got);
    senderThread.join();
    REQUIRE(s.toString() == "ok");
    REQUIRE(sendStatus.toString() == "ok");
    for (int i = 0; i < 8; ++i) {
      CAPTURE(i);
      CHECK(got[i] == static_cast<int>(msgSize[i]));
      CHECK(test::checkPattern(dst[i].data(), msgSize[i], static_cast<uint32_t>(100 * round + i)) ==
            -1);
    }
  }
}

TEST_CASE("32 receives and 256 sends may be outstanding; more are refused with a null request",
          "[transport][tcp][loopback]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  TcpTransport sender(o);
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).toString() == "ok");

  constexpr int kN = transport::kMaxRequests;
  // Alternating small (inline) and large (striped) messages.
  auto sizeOf = [](int i) -> size_t { return (i % 2) == 0 ? 24 + i : (300u << 10) + i; };
  std::vector<std::vector<uint8_t>> src(kN);
  std::vector<std::vector<uint8_t>> dst(kN);
  std::vector<transport::Request*> rreqs(kN);
  for (int i = 0; i < kN; ++i) {
    src[i].resize(sizeOf(i));
    test::fillPattern(&src[i], static_cast<uint32_t>(i));
    dst[i].assign(sizeOf(i), 0);
    std::byte* data = test::asBytes(dst[i].data());
    const size_t size = dst[i].size();
    const int tag = 5;
    REQUIRE(pair.recvComm->irecv(1, &data, &size, &tag, nullptr, nullptr, &rreqs[i]).ok());
    REQUIRE(rreqs[i] != nullptr);
  }
  {
    transport::Request* extra = test::anyRequest();  // NCCL may pre-store 0x1
    uint8_t byte = 0;
    std::byte* data = test::asBytes(&byte);
    const size_t size = 1;
    const int tag = 5;
    REQUIRE(pair.recvComm->irecv(1, &data, &size, &tag, nullptr, nullptr, &extra).ok());
    CHECK(extra == nullptr);
  }
  std::vector<transport::Request*> sreqs(kN);
  for (int i = 0; i < kN; ++i) {
    REQUIRE(pair.sendComm
                ->isend(test::asBytes(src[i].data()), src[i].size(), 5, nullptr, nullptr, &sreqs[i])
                .ok());
    REQUIRE(sreqs[i] != nullptr);
  }
  // Complete in reverse order of posting: completion does not depend on test order.
  Status sendStatus;
  std::thread senderThread([&] {
    for (int i = kN - 1; i >= 0 && sendStatus.ok(); --i) {
      sendStatus = test::waitRequest(sreqs[i]);
    }
  });
  std::vector<int> got(kN, -1);
  Status recvStatus;
  for (int i = kN - 1; i >= 0 && recvStatus.ok(); --i) {
    recvStatus = test::waitRequest(rreqs[i], &got[i]);
  }
  senderThread.join();
  REQUIRE(recvStatus.toString() == "ok");
  REQUIRE(sendStatus.toString() == "ok");
  for (int i = 0; i < kN; ++i) {
    CHECK(got[i] == static_cast<int>(sizeOf(i)));
  }
  for (int i = 0; i < kN; ++i) {
    CAPTURE(i);
    CHECK(test::checkPattern(dst[i].data(), dst[i].size(), static_cast<uint32_t>(i)) == -1);
  }

  SECTION("the send side holds 256 requests before it refuses") {
    std::vector<uint8_t> tiny(4, 1);
    std::vector<transport::Request*> many;
    for (uint32_t i = 0; i < kMaxSendRequests; ++i) {
      transport::Request* r = nullptr;
      REQUIRE(pair.sendComm->isend(test::asBytes(tiny.data()), tiny.size(), 5, nullptr, nullptr, &r)
                  .ok());
      REQUIRE(r != nullptr);
      many.push_back(r);
    }
    transport::Request* r = test::anyRequest();
    REQUIRE(pair.sendComm->isend(test::asBytes(tiny.data()), tiny.size(), 5, nullptr, nullptr, &r)
                .ok());
    CHECK(r == nullptr);
    // Receive them all in groups of 8 (the receiver holds 32 requests at once).
    std::vector<std::vector<uint8_t>> sink(kMaxSendRequests, std::vector<uint8_t>(4));
    Status sendStatus2;
    std::thread senderThread2([&] {
      for (transport::Request* req : many) {
        if (sendStatus2.ok()) {
          sendStatus2 = test::waitRequest(req);
        }
      }
    });
    for (uint32_t i = 0; i < kMaxSendRequests; i += 8) {
      std::byte* data[8];
      size_t sizes[8];
      int tags[8];
      for (int k = 0; k < 8; ++k) {
        data[k] = test::asBytes(sink[i + k].data());
        sizes[k] = 4;
        tags[k] = 5;
      }
      // Eight messages with the same tag cannot share one grouped receive
      // (duplicate tags): receive them one at a time.
      for (int k = 0; k < 8; ++k) {
        transport::Request* req = nullptr;
        REQUIRE(
            pair.recvComm->irecv(1, &data[k], &sizes[k], &tags[k], nullptr, nullptr, &req).ok());
        REQUIRE(req != nullptr);
        REQUIRE(test::waitRequest(req).ok());
      }
    }
    senderThread2.join();
    CHECK(sendStatus2.toString() == "ok");
  }
}

TEST_CASE("both directions progress from separate threads", "[transport][tcp][loopback]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.nSocks = 4;
  o.nThreads = GENERATE(0, 2);
  CAPTURE(o.nThreads);
  TcpTransport a(o);
  TcpTransport b(o);
  TransportPair ab;
  TransportPair ba;
  REQUIRE(test::connectPair(&a, &b, &ab).toString() == "ok");
  REQUIRE(test::connectPair(&b, &a, &ba).toString() == "ok");
  constexpr int kMessages = 40;
  // Runs in its own thread: no Catch assertion here, only an error text.
  auto run = [](TransportPair* pair, uint32_t seedBase, bool sending, std::string* error) {
    std::vector<uint8_t> buf;
    for (int i = 0; i < kMessages; ++i) {
      const size_t size = (i * 7919u) % (2u << 20);
      transport::Request* req = nullptr;
      Status s;
      if (sending) {
        buf.resize(size);
        test::fillPattern(&buf, seedBase + i);
        s = pair->sendComm->isend(test::asBytes(buf.data()), size, 1, nullptr, nullptr, &req);
        if (s.ok() && req != nullptr) {
          s = test::waitRequest(req);
        }
      } else {
        buf.assign(2u << 20, 0);
        std::byte* data = test::asBytes(buf.data());
        const size_t cap = buf.size();
        const int tag = 1;
        s = pair->recvComm->irecv(1, &data, &cap, &tag, nullptr, nullptr, &req);
        int got = -1;
        if (s.ok() && req != nullptr) {
          s = test::waitRequest(req, &got);
        }
        if (s.ok() && got != static_cast<int>(size)) {
          s = internalError("size " + std::to_string(got) + " != " + std::to_string(size));
        }
        if (s.ok() && test::checkPattern(buf.data(), size, seedBase + i) != -1) {
          s = internalError("corrupt message " + std::to_string(i));
        }
      }
      if (s.ok() && req == nullptr) {
        s = internalError("null request");
      }
      if (!s.ok()) {
        *error = s.toString();
        return;
      }
    }
  };
  std::string e1;
  std::string e2;
  std::string e3;
  std::string e4;
  std::thread t1([&] { run(&ab, 1000, true, &e1); });
  std::thread t2([&] { run(&ba, 2000, true, &e2); });
  std::thread t3([&] { run(&ab, 1000, false, &e3); });
  run(&ba, 2000, false, &e4);
  t1.join();
  t2.join();
  t3.join();
  CHECK(e1 == "");
  CHECK(e2 == "");
  CHECK(e3 == "");
  CHECK(e4 == "");
}
