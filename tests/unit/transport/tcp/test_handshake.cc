#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin/transport/tcp/handshake_proof.h"
#include "plugin/transport/tcp/listener.h"
#include "plugin/transport/tcp/tcp_transport.h"
#include "plugin/transport/tcp/wire.h"
#include "tests/support/loopback_socket.h"
#include "tests/support/mock_logger.h"
#include "tests/support/transport_pair.h"
#include "tests/unit/transport/tcp/tcp_test_util.h"

using namespace resilient;
using namespace resilient::transport::tcp;
using resilient::test::readAll;
using resilient::test::TransportPair;
using resilient::test::writeAll;

namespace {

size_t openFdCount() {
  size_t n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) {  // NOLINT(concurrency-mt-unsafe): one thread reads this DIR
      ++n;
    }
    closedir(d);
  }
  return n;
}

// True when `fd` reached EOF or an error (without blocking).
bool closedNow(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) {
    return false;
  }
  char buf[512];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0) {
      return true;
    }
    if (n < 0) {
      return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
  }
}

// The encoded hello of rawHello().
struct HelloBytes {
  HelloBytes(uint64_t nonce, uint16_t index, uint16_t nSockets) {
    encodeHello(test::rawHello(nonce, index, nSockets), bytes);
  }
  uint8_t bytes[kHelloBytes] = {};
};

// One connection a FakeListener served, as far as it got.
struct FakeSocket {
  int fd = -1;
  uint8_t hello[kHelloBytes] = {};
  uint8_t challenge[kChallengeBytes] = {};
  bool responded = false;
  uint8_t response[kResponseBytes] = {};
};

// A listener made of raw sockets on 127.0.0.1 that speaks the handshake as
// pid 4242 holding `token` (which may not be the job's), blocking on the
// calling thread, 5 s at most per wait.
class FakeListener {
 public:
  static constexpr uint32_t kPid = 4242;

  FakeListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      return;
    }
    ListenHandle h;
    h.family = AF_INET;
    h.port = ntohs(addr.sin_port);
    std::memcpy(h.address, &addr.sin_addr, 4);
    encodeHandle(h, handle);
  }
  ~FakeListener() {
    for (const FakeSocket& s : served) {
      ::close(s.fd);
    }
    ::close(fd_);
  }
  FakeListener(const FakeListener&) = delete;
  FakeListener& operator=(const FakeListener&) = delete;

  // Serves `nSockets` connections one after the other: reads the hello,
  // sends the first `challengeBytes` of a challenge proven with `token`
  // (then closes when that is not all of it), reads the response, answers
  // `ack`. Fills `served`.
  void serve(int nSockets, const std::string& token, Refusal ack = Refusal::kNone,
             size_t challengeBytes = kChallengeBytes) {
    const HandshakeSecret secret(token);
    for (int i = 0; i < nSockets; ++i) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 5000) != 1) {
        return;
      }
      FakeSocket s;
      s.fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (s.fd < 0) {
        return;
      }
      timeval timeout{5, 0};
      (void)::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
      served.push_back(s);
      FakeSocket& socket = served.back();
      if (!readAll(socket.fd, socket.hello, kHelloBytes)) {
        continue;
      }
      Challenge c;
      c.pid = kPid;
      c.nonce = auth::freshNonce();
      encodeChallenge(c, socket.challenge);
      c.proof = secret.listenerProof(socket.hello, socket.challenge);
      encodeChallenge(c, socket.challenge);
      if (!writeAll(socket.fd, socket.challenge, challengeBytes) ||
          challengeBytes < kChallengeBytes) {
        ::shutdown(socket.fd, SHUT_RDWR);
        continue;
      }
      socket.responded = readAll(socket.fd, socket.response, kResponseBytes);
      uint8_t bytes[kAckBytes];
      encodeAck(Ack{ack}, bytes);
      (void)writeAll(socket.fd, bytes, sizeof bytes);
    }
  }

  std::byte handle[transport::kHandleSize] = {};
  std::vector<FakeSocket> served;

 private:
  int fd_ = -1;
};

// Polls connect() until it yields a comm or fails (5 s at most).
Status connectTo(TcpTransport* sender, std::byte* handle,
                 std::unique_ptr<transport::SendComm>* sendComm) {
  const uint64_t deadline = test::monotonicMs() + 5000;
  while (test::monotonicMs() < deadline) {
    RESILIENT_TRY(sender->connect(nullptr, 0, handle, false, sendComm));
    if (*sendComm != nullptr) {
      return {};
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return timeoutError("connect did not complete");
}

// Polls accept() until the listener holds no socket (3 s at most); no comm
// may come out of it.
void drainListener(transport::Listener* base) {
  auto* listener = static_cast<TcpListener*>(base);
  const uint64_t deadline = test::monotonicMs() + 3000;
  while (listener->incomingCount() > 0 && test::monotonicMs() < deadline) {
    std::unique_ptr<transport::RecvComm> comm;
    REQUIRE(listener->accept(false, &comm).ok());
    REQUIRE(comm == nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  CHECK(listener->incomingCount() == 0);
}

}  // namespace

TEST_CASE("a job token mismatch fails the connect with invalidUsage and a reason; both sides WARN",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions listenOptions = test::loopbackOptions(AF_INET);
  TcpOptions connectOptions = test::loopbackOptions(AF_INET);
  SECTION("different tokens") {
    listenOptions.jobToken = "job-alpha";
    connectOptions.jobToken = "job-beta";
  }
  SECTION("a token on the listening side only") {
    listenOptions.jobToken = "job-alpha";
  }
  SECTION("a token on the connecting side only") {
    connectOptions.jobToken = "job-beta";
  }
  TcpTransport receiver(listenOptions);
  TcpTransport sender(connectOptions);
  TransportPair pair;
  const Status s = test::connectPair(&sender, &receiver, &pair);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  auto* listener = static_cast<TcpListener*>(pair.listener.get());
  CHECK(s.peer() == listener->address().toString());
  CHECK_THAT(
      s.message(),
      Catch::Contains("job token mismatch: the listener at " + listener->address().toString() +
                      " (pid " + std::to_string(::getpid()) + ") could not prove the job token"));
  CHECK_THAT(s.message(), Catch::Contains("NCCL_RESILIENT_JOB_TOKEN"));
  CHECK(pair.sendComm == nullptr);
  CHECK(pair.recvComm == nullptr);
  // The listener is told, logs it and keeps nothing.
  drainListener(pair.listener.get());
  CHECK(logger.count(NCCL_LOG_WARN, "tcp: job token mismatch: the listener at") == 1);
  CHECK(logger.count(NCCL_LOG_WARN,
                     "job token mismatch: the connector could not verify this "
                     "listener's proof of the job token") >= 1);
}

TEST_CASE("a replayed handshake is refused and never yields a comm",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.jobToken = "job-1";
  o.nSocks = 1;
  // Record a legitimate connector's handshake: the recording listener holds
  // the token, so the connector proves itself on both sockets.
  FakeListener recorder;
  {
    TcpTransport sender(o);
    std::thread serving([&] { recorder.serve(2, "job-1"); });
    std::unique_ptr<transport::SendComm> sendComm;
    const Status s = connectTo(&sender, recorder.handle, &sendComm);
    serving.join();
    REQUIRE(s.ok());
    REQUIRE(sendComm != nullptr);
    CHECK(sendComm->close().ok());
  }
  REQUIRE(recorder.served.size() == 2);

  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::listenOn(&receiver, &pair).ok());
  int comms = 0;
  std::vector<test::RawHandshake> replays(2);
  std::vector<int> fds;
  for (int i = 0; i < 2; ++i) {
    fds.push_back(test::rawConnect(pair.handle));
    REQUIRE(fds.back() >= 0);
  }
  test::acceptWhile(
      pair.listener.get(),
      [&] {
        for (size_t i = 0; i < 2; ++i) {
          const FakeSocket& recorded = recorder.served[i];
          replays[i] = test::rawHandshake(fds[i], recorded.hello, "", recorded.response);
        }
      },
      nullptr, &comms);
  for (const auto& replay : replays) {
    REQUIRE(replay.challenged);  // the hello itself is well-formed
    CHECK(replay.challenge.refusal == Refusal::kNone);
    REQUIRE(replay.acked);
    CHECK(replay.ack.refusal == Refusal::kBadToken);
  }
  drainListener(pair.listener.get());
  CHECK(comms == 0);
  CHECK(logger.count(NCCL_LOG_WARN,
                     "job token mismatch: the connector could not prove the job "
                     "token") >= 1);
  for (const int fd : fds) {
    ::close(fd);
  }
}

TEST_CASE("a listener that cannot prove the job token is rejected by the connector",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.jobToken = "job-1";
  o.nSocks = 1;
  std::string fakeToken = "not-the-token";
  SECTION("another token") {}
  SECTION("no token") {
    fakeToken.clear();
  }
  SECTION("the job's token, and none on the connecting side") {
    fakeToken = "job-1";
    o.jobToken.clear();
  }
  TcpTransport sender(o);
  FakeListener fake;
  std::thread serving([&] { fake.serve(2, fakeToken); });
  std::unique_ptr<transport::SendComm> sendComm;
  const Status s = connectTo(&sender, fake.handle, &sendComm);
  serving.join();
  REQUIRE_FALSE(s.ok());
  CHECK(sendComm == nullptr);
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK_THAT(s.message(), Catch::Contains("(pid 4242) could not prove the job token (both sides "
                                          "must be given the same NCCL_RESILIENT_JOB_TOKEN)"));
  CHECK(logger.count(NCCL_LOG_WARN, "(pid 4242) could not prove the job token") == 1);
  // The connector said so, and proved nothing the fake could replay.
  bool told = false;
  for (const FakeSocket& socket : fake.served) {
    Response response;
    if (socket.responded && decodeResponse(socket.response, &response)) {
      CHECK(response.verdict == Verdict::kNotProven);
      CHECK(response.proof == auth::Proof{});
      told = true;
    }
  }
  CHECK(told);
}

TEST_CASE("the connector fails with a reason when the listener refuses its proof or breaks off",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.jobToken = "job-1";
  o.nSocks = 1;
  TcpTransport sender(o);
  FakeListener fake;
  std::unique_ptr<transport::SendComm> sendComm;
  SECTION("a proof refused") {
    std::thread serving([&] { fake.serve(2, "job-1", Refusal::kBadToken); });
    const Status s = connectTo(&sender, fake.handle, &sendComm);
    serving.join();
    REQUIRE_FALSE(s.ok());
    CHECK(s.kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(s.message(),
               Catch::Contains("(pid 4242) could not verify this process's proof of the job "
                               "token (both sides must be given the same "
                               "NCCL_RESILIENT_JOB_TOKEN)"));
    CHECK(logger.count(NCCL_LOG_WARN, "could not verify this process's proof") == 1);
  }
  SECTION("a duplicate") {
    std::thread serving([&] { fake.serve(2, "job-1", Refusal::kDuplicate); });
    const Status s = connectTo(&sender, fake.handle, &sendComm);
    serving.join();
    REQUIRE_FALSE(s.ok());
    CHECK(s.kind() == ErrorKind::kRemote);
    CHECK_THAT(s.message(), Catch::Contains("duplicate socket"));
  }
  SECTION("a truncated challenge") {
    std::thread serving([&] { fake.serve(2, "job-1", Refusal::kNone, kChallengeBytes - 1); });
    const Status s = connectTo(&sender, fake.handle, &sendComm);
    serving.join();
    REQUIRE_FALSE(s.ok());
    CHECK(s.kind() == ErrorKind::kRemote);
    CHECK_THAT(s.message(), Catch::Contains("closed the connection during the handshake"));
  }
  CHECK(sendComm == nullptr);
}

TEST_CASE(
    "a connector without the token is refused with a WARN and cannot take a legitimate "
    "socket's place",
    "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.jobToken = "job-1";
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::listenOn(&receiver, &pair).ok());
  // Connection 5 of two sockets: the legitimate control socket, then fakes
  // that claim its index and the data socket's, then the legitimate data
  // socket; a fake that stalls after its hello is pending all along.
  const int stalled = test::rawConnect(pair.handle);
  REQUIRE(stalled >= 0);
  const HelloBytes stalledHello(5, 1, 2);
  REQUIRE(writeAll(stalled, stalledHello.bytes, kHelloBytes));
  std::vector<int> fds;
  for (int i = 0; i < 4; ++i) {
    fds.push_back(test::rawConnect(pair.handle));
    REQUIRE(fds.back() >= 0);
  }
  test::RawHandshake control;
  test::RawHandshake fakeData;
  test::RawHandshake fakeControl;
  test::RawHandshake data;
  std::unique_ptr<transport::RecvComm> comm;
  int comms = 0;
  test::acceptWhile(
      pair.listener.get(),
      [&] {
        control = test::rawHandshake(fds[0], HelloBytes(5, 0, 2).bytes, "job-1");
        fakeData = test::rawHandshake(fds[1], HelloBytes(5, 1, 2).bytes, "job-2");
        fakeControl = test::rawHandshake(fds[2], HelloBytes(5, 0, 2).bytes, "");
        data = test::rawHandshake(fds[3], HelloBytes(5, 1, 2).bytes, "job-1");
      },
      &comm, &comms);
  REQUIRE(control.acked);
  CHECK(control.ack.refusal == Refusal::kNone);
  REQUIRE(fakeData.acked);
  CHECK(fakeData.ack.refusal == Refusal::kBadToken);
  REQUIRE(fakeControl.acked);
  CHECK(fakeControl.ack.refusal == Refusal::kBadToken);  // never compared with the others
  REQUIRE(data.acked);
  CHECK(data.ack.refusal == Refusal::kNone);  // the stalled fake is no duplicate
  for (int i = 0; i < 100 && comm == nullptr; ++i) {
    REQUIRE(pair.listener->accept(false, &comm).ok());
    comms += comm != nullptr;
  }
  REQUIRE(comm != nullptr);
  CHECK(comms == 1);
  transport::Endpoint peer;
  REQUIRE(comm->endpoints(nullptr, &peer));
  CHECK(std::string(peer.text) == test::localAddressText(fds[0]));
  CHECK(comm->close().ok());
  CHECK(logger.count(NCCL_LOG_WARN,
                     "job token mismatch: the connector could not prove the job "
                     "token") >= 1);
  CHECK(logger.count(NCCL_LOG_WARN, "host raw-test pid 1, as its hello says") >= 1);
  ::close(stalled);
  for (const int fd : fds) {
    ::close(fd);
  }
}

TEST_CASE("idle and half-open sockets do not keep a legitimate connection out",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.jobToken = "job-1";
  o.handshakeTimeoutMs = 600000;  // nothing here may wait for it
  TcpTransport receiver(o);
  TcpTransport sender(o);
  TransportPair pair;
  REQUIRE(test::listenOn(&receiver, &pair).ok());
  auto* listener = static_cast<TcpListener*>(pair.listener.get());
  constexpr int kIdle = 300;
  constexpr int kHalf = 3;
  STATIC_REQUIRE(kIdle > static_cast<int>(kMaxIncoming));
  // The half hellos first: older than every idle socket, they are still kept.
  std::vector<int> half;
  for (int i = 0; i < kHalf; ++i) {
    half.push_back(test::rawConnect(pair.handle));
    REQUIRE(half.back() >= 0);
    const HelloBytes hello(static_cast<uint64_t>(100 + i), 0, 3);
    REQUIRE(writeAll(half.back(), hello.bytes, kHelloBytes / 2));
  }
  std::vector<int> idle;
  for (int i = 0; i < kIdle; ++i) {
    idle.push_back(test::rawConnect(pair.handle));
    REQUIRE(idle.back() >= 0);
  }

  const uint64_t start = test::monotonicMs();
  REQUIRE(test::connectPair(&sender, &receiver, &pair, 10000).toString() == "ok");
  const uint64_t elapsed = test::monotonicMs() - start;
  CHECK(elapsed < 2000);
  transport::Endpoint senderLocal;
  transport::Endpoint receiverPeer;
  REQUIRE(pair.sendComm->endpoints(&senderLocal, nullptr));
  REQUIRE(pair.recvComm->endpoints(nullptr, &receiverPeer));
  CHECK(std::string(receiverPeer.text) == senderLocal.text);
  REQUIRE(test::roundTrip(pair, 100000, 3, 0).toString() == "ok");

  // Nothing else comes out of the listener; the sockets that sent a part of
  // a hello were kept, the oldest idle ones made room for the newcomers.
  for (int i = 0; i < 20; ++i) {
    std::unique_ptr<transport::RecvComm> comm;
    REQUIRE(pair.listener->accept(false, &comm).ok());
    REQUIRE(comm == nullptr);
  }
  CHECK(listener->incomingCount() <= kMaxIncoming);
  for (const int fd : half) {
    CHECK_FALSE(closedNow(fd));
  }
  int evicted = 0;
  for (const int fd : idle) {
    evicted += closedNow(fd);
  }
  CHECK(evicted >= kIdle + kHalf - static_cast<int>(kMaxIncoming));
  CHECK(closedNow(idle.front()));
  CHECK_FALSE(closedNow(idle.back()));
  CHECK(logger.count(NCCL_LOG_WARN, "without a byte to make room for a newcomer") >= 1);
  for (const int fd : idle) {
    ::close(fd);
  }
  for (const int fd : half) {
    ::close(fd);
  }
}

TEST_CASE(
    "garbage and half handshakes on a listen port are dropped while a real connection "
    "succeeds",
    "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  const size_t fdsBefore = openFdCount();
  {
    TcpOptions o = test::loopbackOptions(AF_INET);
    o.jobToken = "job-1";
    o.handshakeTimeoutMs = 300;
    TcpTransport receiver(o);
    TcpTransport sender(o);
    TransportPair pair;
    REQUIRE(test::listenOn(&receiver, &pair).ok());
    auto* listener = static_cast<TcpListener*>(pair.listener.get());

    // 1. An HTTP request.
    const int http = test::rawConnect(pair.handle);
    REQUIRE(http >= 0);
    const char get[] = "GET / HTTP/1.0\r\n\r\n";
    REQUIRE(writeAll(http, get, sizeof get - 1));
    // 2. A megabyte of junk.
    const int junk = test::rawConnect(pair.handle);
    REQUIRE(junk >= 0);
    std::vector<uint8_t> noise(1u << 20);
    test::fillPattern(&noise, 77);
    std::thread junkWriter([&] { (void)writeAll(junk, noise.data(), noise.size()); });
    // 3. Half a hello, then silence.
    const int half = test::rawConnect(pair.handle);
    REQUIRE(half >= 0);
    REQUIRE(writeAll(half, HelloBytes(42, 0, 3).bytes, kHelloBytes / 2));
    // 4. Connected, silent.
    const int silent = test::rawConnect(pair.handle);
    REQUIRE(silent >= 0);
    // 5. A hello, then silence instead of a response to the challenge.
    const int mute = test::rawConnect(pair.handle);
    REQUIRE(mute >= 0);
    REQUIRE(writeAll(mute, HelloBytes(44, 0, 3).bytes, kHelloBytes));
    // 6. An authenticated socket of a connection whose other sockets never
    // come (its handshake runs while connectPair polls the listener).
    const int lonely = test::rawConnect(pair.handle);
    REQUIRE(lonely >= 0);
    test::RawHandshake lonelyHandshake;
    std::atomic<bool> lonelyDone{false};
    std::thread lonelyClient([&] {
      lonelyHandshake = test::rawHandshake(lonely, HelloBytes(43, 0, 3).bytes, "job-1");
      lonelyDone = true;
    });

    // A real connection succeeds meanwhile, and carries data.
    REQUIRE(test::connectPair(&sender, &receiver, &pair).toString() == "ok");
    REQUIRE(test::roundTrip(pair, 200000, 5, 0).toString() == "ok");

    // Keep polling accept: every bad socket is closed by the handshake deadline.
    const int fds[] = {http, junk, half, silent, mute, lonely};
    constexpr int kFds = sizeof fds / sizeof fds[0];
    bool closed[kFds] = {};
    const uint64_t deadline = test::monotonicMs() + 3000;
    while (test::monotonicMs() < deadline) {
      std::unique_ptr<transport::RecvComm> comm;
      REQUIRE(pair.listener->accept(false, &comm).ok());
      REQUIRE(comm == nullptr);
      bool all = true;
      for (int i = 0; i < kFds; ++i) {
        // The lonely socket's handshake reads it until done.
        closed[i] = closed[i] || ((fds[i] != lonely || lonelyDone) && closedNow(fds[i]));
        all = all && closed[i];
      }
      if (all && listener->incomingCount() == 0) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    lonelyClient.join();
    CHECK(lonelyHandshake.acked);
    CHECK(lonelyHandshake.ack.refusal == Refusal::kNone);
    for (int i = 0; i < kFds; ++i) {
      CAPTURE(i);
      CHECK(closed[i]);
    }
    CHECK(listener->incomingCount() == 0);
    junkWriter.join();
    for (const int fd : fds) {
      ::close(fd);
    }
    CHECK(logger.count(NCCL_LOG_WARN, "dropped a connection") >= 1);
  }
  CHECK(openFdCount() == fdsBefore);  // nothing leaked
}

TEST_CASE("a listener refuses bad versions and duplicate sockets with a reason",
          "[transport][tcp][handshake]") {
  test::CapturingLogger logger(log::Level::kWarn);
  TcpOptions o = test::loopbackOptions(AF_INET);
  TcpTransport receiver(o);
  TransportPair pair;
  REQUIRE(test::listenOn(&receiver, &pair).ok());

  SECTION("version") {
    for (const uint8_t version : {1, 9}) {  // the token digest's protocol, a future one
      CAPTURE(version);
      const int fd = test::rawConnect(pair.handle);
      REQUIRE(fd >= 0);
      HelloBytes hello(7, 0, 2);
      hello.bytes[4] = version;
      test::RawHandshake h;
      test::acceptWhile(pair.listener.get(), [&] { h = test::rawHandshake(fd, hello.bytes, ""); });
      REQUIRE(h.challenged);
      CHECK(h.challenge.refusal == Refusal::kBadVersion);
      CHECK(h.challenge.version == kProtocolVersion);
      CHECK_FALSE(h.acked);
      ::close(fd);
    }
  }
  SECTION("duplicate index, then inconsistent sizes, then the real socket completes") {
    std::vector<int> fds;
    for (int i = 0; i < 4; ++i) {
      fds.push_back(test::rawConnect(pair.handle));
      REQUIRE(fds.back() >= 0);
    }
    test::RawHandshake first;
    test::RawHandshake dup;
    test::RawHandshake odd;
    test::RawHandshake second;
    std::unique_ptr<transport::RecvComm> comm;
    test::acceptWhile(
        pair.listener.get(),
        [&] {
          first = test::rawHandshake(fds[0], HelloBytes(9, 0, 2).bytes, "");
          dup = test::rawHandshake(fds[1], HelloBytes(9, 0, 2).bytes, "");  // index 0 again
          // Says 3 sockets, the first said 2.
          odd = test::rawHandshake(fds[2], HelloBytes(9, 1, 3).bytes, "");
          second = test::rawHandshake(fds[3], HelloBytes(9, 1, 2).bytes, "");
        },
        &comm);
    REQUIRE(first.acked);
    CHECK(first.ack.refusal == Refusal::kNone);
    REQUIRE(dup.acked);
    CHECK(dup.ack.refusal == Refusal::kDuplicate);
    REQUIRE(odd.acked);
    CHECK(odd.ack.refusal == Refusal::kBadHello);
    REQUIRE(second.acked);
    CHECK(second.ack.refusal == Refusal::kNone);
    for (int i = 0; i < 100 && comm == nullptr; ++i) {
      REQUIRE(pair.listener->accept(false, &comm).ok());
    }
    REQUIRE(comm != nullptr);
    transport::Endpoint local;
    transport::Endpoint peer;
    REQUIRE(comm->endpoints(&local, &peer));
    CHECK(std::string(peer.text) == test::localAddressText(fds[0]));
    CHECK(comm->close().ok());
    for (const int fd : fds) {
      ::close(fd);
    }
  }
  CHECK(logger.count(NCCL_LOG_WARN, "refused") >= 1);
}

TEST_CASE("connect gives up after connectTimeoutMs when nobody listens, naming the address",
          "[transport][tcp][handshake]") {
  // A bound port that is not listening: connections to it are refused.
  const test::LoopbackSocket placeholder = test::bindLoopback(false);
  ListenHandle h;
  h.family = AF_INET;
  h.port = placeholder.port;
  const in_addr loopback{htonl(INADDR_LOOPBACK)};
  std::memcpy(h.address, &loopback, 4);
  std::byte handle[transport::kHandleSize] = {};
  encodeHandle(h, handle);

  TcpOptions o = test::loopbackOptions(AF_INET);
  o.connectTimeoutMs = 300;
  TcpTransport sender(o);
  const uint64_t start = test::monotonicMs();
  Status s;
  std::unique_ptr<transport::SendComm> comm;
  while (s.ok() && comm == nullptr && test::monotonicMs() < start + 5000) {
    s = sender.connect(nullptr, 0, handle, false, &comm);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const uint64_t elapsed = test::monotonicMs() - start;
  REQUIRE_FALSE(s.ok());
  CHECK(comm == nullptr);
  CHECK(s.kind() == ErrorKind::kTimeout);
  CHECK(s.peer() == "127.0.0.1:" + std::to_string(h.port));
  CHECK_THAT(s.message(), Catch::Contains("refused"));
  CHECK(elapsed >= 290);
  CHECK(elapsed < 3000);
  CHECK(toNcclResult(s) == ncclRemoteError);

  SECTION("a later connect with the same buffer starts afresh") {
    comm.reset();
    const Status again = sender.connect(nullptr, 0, handle, false, &comm);
    CHECK(again.ok());  // in progress again
    CHECK(comm == nullptr);
  }
}

TEST_CASE("connect refuses a malformed handle at once", "[transport][tcp][handshake]") {
  TcpTransport sender(test::loopbackOptions(AF_INET));
  std::byte junk[transport::kHandleSize];
  std::memset(junk, 0x5a, sizeof junk);
  std::unique_ptr<transport::SendComm> comm;
  const Status s = sender.connect(nullptr, 0, junk, false, &comm);
  REQUIRE_FALSE(s.ok());
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CHECK(comm == nullptr);
  CHECK_FALSE(sender.connect(nullptr, 7, junk, false, &comm).ok());  // no device 7
}

TEST_CASE("several connections to one listener are told apart by their nonce",
          "[transport][tcp][handshake]") {
  TcpOptions o = test::loopbackOptions(AF_INET);
  o.nSocks = 3;
  TcpTransport receiver(o);
  TcpTransport sender(o);
  TransportPair pair;
  REQUIRE(test::listenOn(&receiver, &pair).ok());
  constexpr int kConns = 4;
  // Each connection polls with its own copy of the handle (a distinct buffer).
  std::byte handles[kConns][transport::kHandleSize];
  std::unique_ptr<transport::SendComm> send[kConns];
  std::vector<std::unique_ptr<transport::RecvComm>> recv;
  for (auto& h : handles) {
    std::memcpy(h, pair.handle, sizeof h);
  }
  const uint64_t deadline = test::monotonicMs() + 5000;
  int connected = 0;
  while ((connected < kConns || recv.size() < kConns) && test::monotonicMs() < deadline) {
    for (int i = 0; i < kConns; ++i) {
      if (send[i] == nullptr) {
        REQUIRE(sender.connect(nullptr, 0, handles[i], false, &send[i]).ok());
        connected += send[i] != nullptr;
      }
    }
    std::unique_ptr<transport::RecvComm> comm;
    REQUIRE(pair.listener->accept(false, &comm).ok());
    if (comm != nullptr) {
      recv.push_back(std::move(comm));
    }
  }
  REQUIRE(connected == kConns);
  REQUIRE(recv.size() == kConns);
  // Pair them up by endpoints and check each carries its own data.
  for (int i = 0; i < kConns; ++i) {
    transport::Endpoint sLocal;
    REQUIRE(send[i]->endpoints(&sLocal, nullptr));
    transport::RecvComm* match = nullptr;
    for (const auto& r : recv) {
      transport::Endpoint rPeer;
      REQUIRE(r->endpoints(nullptr, &rPeer));
      if (std::string(rPeer.text) == sLocal.text) {
        match = r.get();
      }
    }
    REQUIRE(match != nullptr);
    uint64_t value = 0x1111111111111111ull * static_cast<uint64_t>(i + 1);
    uint64_t out = 0;
    std::byte* data = test::asBytes(&out);
    const size_t cap = sizeof out;
    const int tag = i;
    transport::Request* rreq = nullptr;
    transport::Request* sreq = nullptr;
    REQUIRE(match->irecv(1, &data, &cap, &tag, nullptr, nullptr, &rreq).ok());
    REQUIRE(send[i]->isend(test::asBytes(&value), sizeof value, i, nullptr, nullptr, &sreq).ok());
    REQUIRE(test::waitRequest(sreq).ok());
    REQUIRE(test::waitRequest(rreq).ok());
    CHECK(out == value);
  }
  for (int i = 0; i < kConns; ++i) {
    CHECK(send[i]->close().ok());
  }
  for (const auto& r : recv) {
    CHECK(r->close().ok());
  }
}
