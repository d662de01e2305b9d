#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin/transport/tcp/tcp_transport.h"
#include "plugin/transport/tcp/wire.h"
#include "tests/support/mock_logger.h"
#include "tests/support/transport_pair.h"
#include "tests/unit/transport/tcp/tcp_test_util.h"

using namespace resilient;
using namespace resilient::transport::tcp;
using resilient::test::TransportPair;

namespace {

// Polls test() until it fails (or timeoutMs); returns the error (ok on timeout).
Status waitError(transport::Request* request, int timeoutMs = 5000) {
  const uint64_t deadline = test::monotonicMs() + static_cast<uint64_t>(timeoutMs);
  while (test::monotonicMs() < deadline) {
    int done = 0;
    Status s = request->test(&done, nullptr);
    if (!s.ok()) {
      return s;
    }
    std::this_thread::yield();
  }
  return {};
}

transport::Request* postRecv(transport::RecvComm* comm, void* buf, size_t size, int tag) {
  transport::Request* req = nullptr;
  std::byte* data = test::asBytes(buf);
  REQUIRE(comm->irecv(1, &data, &size, &tag, nullptr, nullptr, &req).ok());
  REQUIRE(req != nullptr);
  return req;
}

// A fake connector made of raw sockets: completes the handshake (control +
// one data socket), leaving *recvComm accepted and the raw control socket to
// write frames on.
void rawConnection(TcpTransport* receiver, TransportPair* pair, int* control, int* data) {
  REQUIRE(test::listenOn(receiver, pair).ok());
  int fds[2];
  test::RawHandshake handshakes[2];
  for (int i = 0; i < 2; ++i) {
    fds[i] = test::rawConnect(pair->handle);
    REQUIRE(fds[i] >= 0);
  }
  test::acceptWhile(
      pair->listener.get(),
      [&] {
        for (int i = 0; i < 2; ++i) {
          Hello h = test::rawHello(99, static_cast<uint16_t>(i), 2);
          h.chunkBytes = kMinChunkBytes;
          uint8_t bytes[kHelloBytes];
          encodeHello(h, bytes);
          handshakes[i] = test::rawHandshake(fds[i], bytes, receiver->options().jobToken);
        }
      },
      &pair->recvComm);
  for (const auto& handshake : handshakes) {
    REQUIRE(handshake.acked);
    REQUIRE(handshake.ack.refusal == Refusal::kNone);
  }
  const uint64_t deadline = test::monotonicMs() + 3000;
  while (pair->recvComm == nullptr && test::monotonicMs() < deadline) {
    REQUIRE(pair->listener->accept(false, &pair->recvComm).ok());
  }
  REQUIRE(pair->recvComm != nullptr);
  *control = fds[0];
  *data = fds[1];
}

void sendFrame(int fd, const FrameHeader& frame, const void* payload = nullptr) {
  uint8_t header[kFrameHeaderBytes];
  encodeFrame(frame, header);
  REQUIRE(::send(fd, header, sizeof header, MSG_NOSIGNAL) ==
          static_cast<ssize_t>(kFrameHeaderBytes));
  if (payload != nullptr && frame.size > 0) {
    REQUIRE(::send(fd, payload, frame.size, MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size));
  }
}

}  // namespace

TEST_CASE("a closed sender is a remote error on the receiver, naming the peer; it is sticky",
          "[transport][tcp][errors]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.nThreads = GENERATE(0, 2);  // bytes moved by test() or by helper threads
  CAPTURE(o.nThreads);
  TcpTransport sender(o);
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).ok());
  transport::Endpoint senderLocal;
  REQUIRE(pair.sendComm->endpoints(&senderLocal, nullptr));

  std::vector<uint8_t> buf(4u << 20);
  SECTION("waiting for a header") {}
  SECTION("waiting for striped data") {
    // The header arrives, the data never does.
    transport::Request* sreq = nullptr;
    std::vector<uint8_t> src(buf.size(), 1);
    transport::Request* rreq = postRecv(pair.recvComm.get(), buf.data(), buf.size(), 1);
    REQUIRE(pair.sendComm->isend(test::asBytes(src.data()), src.size(), 1, nullptr, nullptr, &sreq)
                .ok());
    REQUIRE(test::waitRequest(sreq).ok());
    REQUIRE(test::waitRequest(rreq).ok());
  }
  transport::Request* rreq = postRecv(pair.recvComm.get(), buf.data(), buf.size(), 1);
  REQUIRE(pair.sendComm->close().ok());
  pair.sendComm.reset();

  const Status s = waitError(rreq);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kRemote);
  CHECK(s.peer() == senderLocal.text);
  CHECK(toNcclResult(s) == ncclRemoteError);
  CHECK_THAT(s.toString(), Catch::Contains(senderLocal.text));

  // Sticky: every later call fails at once with the same error.
  int done = 1;
  CHECK(rreq->test(&done, nullptr).toString() == s.toString());
  CHECK(done == 0);
  transport::Request* another = test::anyRequest();
  std::byte* data = test::asBytes(buf.data());
  const size_t size = buf.size();
  const int tag = 1;
  CHECK(pair.recvComm->irecv(1, &data, &size, &tag, nullptr, nullptr, &another).toString() ==
        s.toString());
  CHECK(another == nullptr);
  transport::Request* flush = test::anyRequest();
  CHECK(pair.recvComm->iflush(1, &data, nullptr, nullptr, &flush).toString() == s.toString());
}

TEST_CASE("a closed receiver is a remote error on the sender; it is sticky",
          "[transport][tcp][errors]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.nThreads = GENERATE(0, 2);  // bytes moved by test() or by helper threads
  CAPTURE(o.nThreads);
  TcpTransport sender(o);
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).ok());
  transport::Endpoint senderPeer;
  REQUIRE(pair.sendComm->endpoints(nullptr, &senderPeer));
  REQUIRE(pair.recvComm->close().ok());
  pair.recvComm.reset();

  size_t size = 0;
  SECTION("small messages") {
    size = 100;
  }
  SECTION("large messages") {
    size = 8u << 20;
  }
  std::vector<uint8_t> src(size, 7);
  Status s;
  const uint64_t deadline = test::monotonicMs() + 5000;
  while (s.ok() && test::monotonicMs() < deadline) {
    transport::Request* sreq = nullptr;
    s = pair.sendComm->isend(test::asBytes(src.data()), src.size(), 0, nullptr, nullptr, &sreq);
    if (s.ok() && sreq != nullptr) {
      const uint64_t until = test::monotonicMs() + 20;
      int done = 0;
      while (s.ok() && done == 0 && test::monotonicMs() < until) {
        s = sreq->test(&done, nullptr);
      }
    }
  }
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kRemote);
  CHECK(s.peer() == senderPeer.text);
  transport::Request* sreq = test::anyRequest();
  CHECK(pair.sendComm->isend(test::asBytes(src.data()), src.size(), 0, nullptr, nullptr, &sreq)
            .toString() == s.toString());
  CHECK(sreq == nullptr);
}

TEST_CASE("close never waits on a peer that stopped reading", "[transport][tcp][errors]") {
  TcpTransport sender(test::loopbackOptions(AF_INET));
  TcpTransport receiver(test::loopbackOptions(AF_INET));
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).ok());
  // 64 MiB the receiver never asks for: the helper threads block on full sockets.
  std::vector<uint8_t> src(64u << 20, 3);
  transport::Request* sreq = nullptr;
  REQUIRE(
      pair.sendComm->isend(test::asBytes(src.data()), src.size(), 0, nullptr, nullptr, &sreq).ok());
  int done = 0;
  for (int i = 0; i < 100; ++i) {
    REQUIRE(sreq->test(&done, nullptr).ok());
  }
  CHECK(done == 0);
  const uint64_t start = test::monotonicMs();
  CHECK(pair.sendComm->close().ok());
  pair.sendComm.reset();
  CHECK(pair.recvComm->close().ok());
  pair.recvComm.reset();
  CHECK(test::monotonicMs() - start < 1000);
}

TEST_CASE("protocol violations on the control socket fail the comm, naming the peer",
          "[transport][tcp][errors]") {
  TcpTransport receiver(test::loopbackOptions(AF_INET));
  TransportPair pair;
  int control = -1;
  int data = -1;
  rawConnection(&receiver, &pair, &control, &data);
  const std::string peer = test::localAddressText(control);

  std::vector<uint8_t> buf(1024);
  Status s;
  SECTION("a tag no buffer was posted for") {
    transport::Request* rreq = postRecv(pair.recvComm.get(), buf.data(), buf.size(), 1);
    sendFrame(control, FrameHeader{2, kFrameInline, 4}, "abcd");
    s = waitError(rreq);
    CHECK_THAT(s.message(), Catch::Contains("tag 2 matches no posted receive buffer"));
  }
  SECTION("a message larger than the posted buffer") {
    transport::Request* rreq = postRecv(pair.recvComm.get(), buf.data(), 8, 1);
    sendFrame(control, FrameHeader{1, kFrameInline, 9}, "123456789");
    s = waitError(rreq);
    CHECK_THAT(s.message(), Catch::Contains("exceeds the posted buffer of 8 bytes"));
  }
  SECTION("a duplicate tag within one grouped receive") {
    std::byte* bufs[2] = {test::asBytes(buf.data()), test::asBytes(buf.data() + 512)};
    const size_t sizes[2] = {512, 512};
    const int tags[2] = {1, 2};
    transport::Request* rreq = nullptr;
    REQUIRE(pair.recvComm->irecv(2, bufs, sizes, tags, nullptr, nullptr, &rreq).ok());
    sendFrame(control, FrameHeader{1, kFrameInline, 1}, "x");
    sendFrame(control, FrameHeader{1, kFrameInline, 1}, "y");
    s = waitError(rreq);
    CHECK_THAT(s.message(), Catch::Contains("second message with tag 1"));
  }
  SECTION("a header with a bad magic") {
    transport::Request* rreq = postRecv(pair.recvComm.get(), buf.data(), buf.size(), 1);
    const char junk[kFrameHeaderBytes] = "this is no head";
    REQUIRE(::send(control, junk, sizeof junk, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof junk));
    s = waitError(rreq);
    CHECK_THAT(s.message(), Catch::Contains("bad frame magic"));
  }
  SECTION("a size above 1 GiB") {
    transport::Request* rreq = postRecv(pair.recvComm.get(), buf.data(), buf.size(), 1);
    uint8_t header[kFrameHeaderBytes];
    encodeFrame(FrameHeader{1, 0, 1}, header);
    header[15] = 0x40;  // size |= 1 << 62
    REQUIRE(::send(control, header, sizeof header, MSG_NOSIGNAL) ==
            static_cast<ssize_t>(sizeof header));
    s = waitError(rreq);
    CHECK_THAT(s.message(), Catch::Contains("larger than 1 GiB"));
  }
  SECTION("a truncated frame (the peer closes mid-header)") {
    transport::Request* rreq = postRecv(pair.recvComm.get(), buf.data(), buf.size(), 1);
    uint8_t header[kFrameHeaderBytes];
    encodeFrame(FrameHeader{1, kFrameInline, 100}, header);
    REQUIRE(::send(control, header, 7, MSG_NOSIGNAL) == 7);
    ::shutdown(control, SHUT_WR);
    s = waitError(rreq);
    CHECK_THAT(s.message(), Catch::Contains("closed by the peer"));
  }
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kRemote);
  CHECK(s.peer() == peer);
  // Sticky.
  transport::Request* again = nullptr;
  std::byte* bufPtr = test::asBytes(buf.data());
  const size_t size = buf.size();
  const int tag = 1;
  CHECK(pair.recvComm->irecv(1, &bufPtr, &size, &tag, nullptr, nullptr, &again).toString() ==
        s.toString());
  ::close(control);
  ::close(data);
}

TEST_CASE("striped data from a raw peer lands by the chunk rule", "[transport][tcp][errors]") {
  // The receiver expects chunk i of a striped message on data socket
  // (counter + i) % nSocks; with one data socket everything goes there.
  TcpTransport receiver(test::loopbackOptions(AF_INET));
  TransportPair pair;
  int control = -1;
  int data = -1;
  rawConnection(&receiver, &pair, &control, &data);
  std::vector<uint8_t> src(3 * kMinChunkBytes + 11);
  test::fillPattern(&src, 9);
  std::vector<uint8_t> dst(src.size());
  transport::Request* rreq = postRecv(pair.recvComm.get(), dst.data(), dst.size(), 4);
  sendFrame(control, FrameHeader{4, 0, src.size()});
  REQUIRE(::send(data, src.data(), src.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(src.size()));
  int got = -1;
  REQUIRE(test::waitRequest(rreq, &got).ok());
  CHECK(got == static_cast<int>(src.size()));
  CHECK(test::checkPattern(dst.data(), dst.size(), 9) == -1);
  ::close(control);
  ::close(data);
}

TEST_CASE("invalid calls are refused without failing the comm", "[transport][tcp][errors]") {
  TcpTransport sender(test::loopbackOptions(AF_INET));
  TcpTransport receiver(test::loopbackOptions(AF_INET));
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).ok());
  uint8_t byte = 0;
  transport::Request* req = nullptr;
  Status s =
      pair.sendComm->isend(test::asBytes(&byte), (size_t{1} << 30) + 1, 0, nullptr, nullptr, &req);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK(req == nullptr);
  std::byte* bufs[9] = {};
  size_t sizes[9] = {};
  int tags[9] = {};
  s = pair.recvComm->irecv(9, bufs, sizes, tags, nullptr, nullptr, &req);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  // Host memory needs no registration, but regMr still hands out a region.
  std::unique_ptr<transport::MemoryRegion> region;
  CHECK(pair.sendComm->regMr(test::asBytes(&byte), 1, transport::kPtrHost, &region).ok());
  CHECK(region != nullptr);
  CHECK(pair.sendComm->deregMr(std::move(region)).ok());
  CHECK(pair.recvComm->regMr(test::asBytes(&byte), 1, transport::kPtrHost, &region).ok());
  CHECK(region != nullptr);
  CHECK(pair.recvComm->deregMr(std::move(region)).ok());
  CHECK(pair.sendComm->regMr(test::asBytes(&byte), 1, transport::kPtrCuda, &region).kind() ==
        ErrorKind::kInvalidUsage);
  CHECK(region == nullptr);
  std::unique_ptr<transport::Context> ctx;
  CHECK(sender.initContext(1, transport::CommConfig{}, &ctx).ok());
  CHECK(ctx == nullptr);
  // The comms still work.
  transport::Request* rreq = postRecv(pair.recvComm.get(), &byte, 1, 0);
  uint8_t one = 1;
  REQUIRE(pair.sendComm->isend(test::asBytes(&one), 1, 0, nullptr, nullptr, &req).ok());
  REQUIRE(test::waitRequest(req).ok());
  REQUIRE(test::waitRequest(rreq).ok());
  CHECK(byte == 1);
}
