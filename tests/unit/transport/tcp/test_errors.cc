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
Status waitError(transport::Transport* t, void* request, int timeoutMs = 5000) {
  const uint64_t deadline = test::monotonicMs() + static_cast<uint64_t>(timeoutMs);
  while (test::monotonicMs() < deadline) {
    int done = 0;
    Status s = t->test(request, &done, nullptr);
    if (!s.ok()) {
      return s;
    }
    std::this_thread::yield();
  }
  return {};
}

void* postRecv(TcpTransport* t, void* comm, void* buf, size_t size, int tag) {
  void* req = nullptr;
  REQUIRE(t->irecv(comm, 1, &buf, &size, &tag, nullptr, nullptr, &req).ok());
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
      receiver, pair->listenComm,
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
    REQUIRE(receiver->accept(pair->listenComm, &pair->recvComm).ok());
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
  REQUIRE(sender.endpoints(pair.sendComm, &senderLocal, nullptr));

  std::vector<uint8_t> buf(4u << 20);
  SECTION("waiting for a header") {}
  SECTION("waiting for striped data") {
    // The header arrives, the data never does.
    void* sreq = nullptr;
    std::vector<uint8_t> src(buf.size(), 1);
    void* rreq = postRecv(&receiver, pair.recvComm, buf.data(), buf.size(), 1);
    REQUIRE(sender.isend(pair.sendComm, src.data(), src.size(), 1, nullptr, nullptr, &sreq).ok());
    REQUIRE(test::waitRequest(&sender, sreq).ok());
    REQUIRE(test::waitRequest(&receiver, rreq).ok());
  }
  void* rreq = postRecv(&receiver, pair.recvComm, buf.data(), buf.size(), 1);
  REQUIRE(sender.closeSend(pair.sendComm).ok());
  pair.sendComm = nullptr;

  const Status s = waitError(&receiver, rreq);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kRemote);
  CHECK(s.peer() == senderLocal.text);
  CHECK(toNcclResult(s) == ncclRemoteError);
  CHECK_THAT(s.toString(), Catch::Contains(senderLocal.text));

  // Sticky: every later call fails at once with the same error.
  int done = 1;
  CHECK(receiver.test(rreq, &done, nullptr).toString() == s.toString());
  CHECK(done == 0);
  void* another = reinterpret_cast<void*>(0x1);
  void* data = buf.data();
  const size_t size = buf.size();
  const int tag = 1;
  CHECK(
      receiver.irecv(pair.recvComm, 1, &data, &size, &tag, nullptr, nullptr, &another).toString() ==
      s.toString());
  CHECK(another == nullptr);
  void* flush = reinterpret_cast<void*>(0x1);
  CHECK(receiver.iflush(pair.recvComm, 1, &data, nullptr, nullptr, &flush).toString() ==
        s.toString());
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
  REQUIRE(sender.endpoints(pair.sendComm, nullptr, &senderPeer));
  REQUIRE(receiver.closeRecv(pair.recvComm).ok());
  pair.recvComm = nullptr;

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
    void* sreq = nullptr;
    s = sender.isend(pair.sendComm, src.data(), src.size(), 0, nullptr, nullptr, &sreq);
    if (s.ok() && sreq != nullptr) {
      const uint64_t until = test::monotonicMs() + 20;
      int done = 0;
      while (s.ok() && done == 0 && test::monotonicMs() < until) {
        s = sender.test(sreq, &done, nullptr);
      }
    }
  }
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kRemote);
  CHECK(s.peer() == senderPeer.text);
  void* sreq = reinterpret_cast<void*>(0x1);
  CHECK(
      sender.isend(pair.sendComm, src.data(), src.size(), 0, nullptr, nullptr, &sreq).toString() ==
      s.toString());
  CHECK(sreq == nullptr);
}

TEST_CASE("close never waits on a peer that stopped reading", "[transport][tcp][errors]") {
  TcpTransport sender(test::loopbackOptions(AF_INET));
  TcpTransport receiver(test::loopbackOptions(AF_INET));
  TransportPair pair;
  REQUIRE(test::connectPair(&sender, &receiver, &pair).ok());
  // 64 MiB the receiver never asks for: the helper threads block on full sockets.
  std::vector<uint8_t> src(64u << 20, 3);
  void* sreq = nullptr;
  REQUIRE(sender.isend(pair.sendComm, src.data(), src.size(), 0, nullptr, nullptr, &sreq).ok());
  int done = 0;
  for (int i = 0; i < 100; ++i) {
    REQUIRE(sender.test(sreq, &done, nullptr).ok());
  }
  CHECK(done == 0);
  const uint64_t start = test::monotonicMs();
  CHECK(sender.closeSend(pair.sendComm).ok());
  pair.sendComm = nullptr;
  CHECK(receiver.closeRecv(pair.recvComm).ok());
  pair.recvComm = nullptr;
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
    void* rreq = postRecv(&receiver, pair.recvComm, buf.data(), buf.size(), 1);
    sendFrame(control, FrameHeader{2, kFrameInline, 4}, "abcd");
    s = waitError(&receiver, rreq);
    CHECK_THAT(s.message(), Catch::Contains("tag 2 matches no posted receive buffer"));
  }
  SECTION("a message larger than the posted buffer") {
    void* rreq = postRecv(&receiver, pair.recvComm, buf.data(), 8, 1);
    sendFrame(control, FrameHeader{1, kFrameInline, 9}, "123456789");
    s = waitError(&receiver, rreq);
    CHECK_THAT(s.message(), Catch::Contains("exceeds the posted buffer of 8 bytes"));
  }
  SECTION("a duplicate tag within one grouped receive") {
    void* bufs[2] = {buf.data(), buf.data() + 512};
    const size_t sizes[2] = {512, 512};
    const int tags[2] = {1, 2};
    void* rreq = nullptr;
    REQUIRE(receiver.irecv(pair.recvComm, 2, bufs, sizes, tags, nullptr, nullptr, &rreq).ok());
    sendFrame(control, FrameHeader{1, kFrameInline, 1}, "x");
    sendFrame(control, FrameHeader{1, kFrameInline, 1}, "y");
    s = waitError(&receiver, rreq);
    CHECK_THAT(s.message(), Catch::Contains("second message with tag 1"));
  }
  SECTION("a header with a bad magic") {
    void* rreq = postRecv(&receiver, pair.recvComm, buf.data(), buf.size(), 1);
    const char junk[kFrameHeaderBytes] = "this is no head";
    REQUIRE(::send(control, junk, sizeof junk, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof junk));
    s = waitError(&receiver, rreq);
    CHECK_THAT(s.message(), Catch::Contains("bad frame magic"));
  }
  SECTION("a size above 1 GiB") {
    void* rreq = postRecv(&receiver, pair.recvComm, buf.data(), buf.size(), 1);
    uint8_t header[kFrameHeaderBytes];
    encodeFrame(FrameHeader{1, 0, 1}, header);
    header[15] = 0x40;  // size |= 1 << 62
    REQUIRE(::send(control, header, sizeof header, MSG_NOSIGNAL) ==
            static_cast<ssize_t>(sizeof header));
    s = waitError(&receiver, rreq);
    CHECK_THAT(s.message(), Catch::Contains("larger than 1 GiB"));
  }
  SECTION("a truncated frame (the peer closes mid-header)") {
    void* rreq = postRecv(&receiver, pair.recvComm, buf.data(), buf.size(), 1);
    uint8_t header[kFrameHeaderBytes];
    encodeFrame(FrameHeader{1, kFrameInline, 100}, header);
    REQUIRE(::send(control, header, 7, MSG_NOSIGNAL) == 7);
    ::shutdown(control, SHUT_WR);
    s = waitError(&receiver, rreq);
    CHECK_THAT(s.message(), Catch::Contains("closed by the peer"));
  }
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kRemote);
  CHECK(s.peer() == peer);
  // Sticky.
  void* again = nullptr;
  void* bufPtr = buf.data();
  const size_t size = buf.size();
  const int tag = 1;
  CHECK(
      receiver.irecv(pair.recvComm, 1, &bufPtr, &size, &tag, nullptr, nullptr, &again).toString() ==
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
  void* rreq = postRecv(&receiver, pair.recvComm, dst.data(), dst.size(), 4);
  sendFrame(control, FrameHeader{4, 0, src.size()});
  REQUIRE(::send(data, src.data(), src.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(src.size()));
  int got = -1;
  REQUIRE(test::waitRequest(&receiver, rreq, &got).ok());
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
  void* req = nullptr;
  Status s = sender.isend(pair.sendComm, &byte, (size_t{1} << 30) + 1, 0, nullptr, nullptr, &req);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK(req == nullptr);
  void* bufs[9] = {};
  size_t sizes[9] = {};
  int tags[9] = {};
  s = receiver.irecv(pair.recvComm, 9, bufs, sizes, tags, nullptr, nullptr, &req);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  void* mh = reinterpret_cast<void*>(0x1);
  CHECK(sender.regMr(pair.sendComm, &byte, 1, transport::kPtrHost, &mh).ok());
  CHECK(mh == nullptr);
  CHECK(sender.deregMr(pair.sendComm, mh).ok());
  CHECK(sender.regMr(pair.sendComm, &byte, 1, transport::kPtrCuda, &mh).kind() ==
        ErrorKind::kInvalidUsage);
  CHECK_FALSE(sender.isend(pair.recvComm, &byte, 1, 0, nullptr, nullptr, &req).ok());
  int done = 1;
  CHECK_FALSE(sender.test(nullptr, &done, nullptr).ok());
  CHECK(done == 0);
  void* ctx = reinterpret_cast<void*>(0x1);
  CHECK(sender.initContext(1, transport::CommConfig{}, &ctx).ok());
  CHECK(ctx == nullptr);
  CHECK(sender.finalizeContext(ctx).ok());
  // The comms still work.
  void* rreq = postRecv(&receiver, pair.recvComm, &byte, 1, 0);
  uint8_t one = 1;
  REQUIRE(sender.isend(pair.sendComm, &one, 1, 0, nullptr, nullptr, &req).ok());
  REQUIRE(test::waitRequest(&sender, req).ok());
  REQUIRE(test::waitRequest(&receiver, rreq).ok());
  CHECK(byte == 1);
}
