#include "tests/support/transport_pair.h"

#include <string>
#include <thread>

#include "common/clock.h"

namespace resilient::test {

uint64_t monotonicMs() {
  return monotonicNs() / 1000000;
}

TransportPair::~TransportPair() {
  if (sendComm != nullptr) {
    (void)sendComm->close();
    sendComm.reset();
  }
  if (recvComm != nullptr) {
    (void)recvComm->close();
    recvComm.reset();
  }
  if (listener != nullptr) {
    (void)listener->close();
    listener.reset();
  }
}

Status listenOn(transport::Transport* receiver, TransportPair* pair) {
  pair->receiver = receiver;
  int ndev = 0;
  RESILIENT_TRY(receiver->devices(&ndev));
  if (ndev < 1) {
    return internalError("no device");
  }
  return receiver->listen(pair->receiverCtx, 0, pair->handle, &pair->listener);
}

Status connectPair(transport::Transport* sender, transport::Transport* receiver,
                   TransportPair* pair, int timeoutMs) {
  pair->sender = sender;
  if (pair->listener == nullptr) {
    RESILIENT_TRY(listenOn(receiver, pair));
  }
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  while (pair->sendComm == nullptr || pair->recvComm == nullptr) {
    if (pair->sendComm == nullptr) {
      RESILIENT_TRY(sender->connect(pair->senderCtx, 0, pair->handle, false, &pair->sendComm));
    }
    if (pair->recvComm == nullptr) {
      RESILIENT_TRY(pair->listener->accept(false, &pair->recvComm));
    }
    if (monotonicMs() > deadline) {
      return timeoutError("connect/accept did not complete");
    }
    std::this_thread::yield();
  }
  return {};
}

Status waitRequest(transport::Request* request, int* sizes, int timeoutMs) {
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  for (;;) {
    int done = 0;
    RESILIENT_TRY(request->test(&done, sizes));
    if (done != 0) {
      return {};
    }
    if (monotonicMs() > deadline) {
      return timeoutError("request did not complete");
    }
    std::this_thread::yield();
  }
}

Status postRecv(TransportPair& pair, std::byte* buf, size_t size, int tag,
                transport::Request** request) {
  transport::MemoryRegion* regions[1] = {nullptr};
  return pair.recvComm->irecv(1, &buf, &size, &tag, regions, nullptr, request);
}

Status roundTrip(TransportPair& pair, size_t size, uint32_t seed, int tag, int timeoutMs) {
  const std::string what = std::to_string(size) + " bytes (seed " + std::to_string(seed) + ")";
  std::vector<uint8_t> src(size);
  fillPattern(&src, seed);
  std::vector<uint8_t> dst(size + 1, 0xee);
  transport::Request* rreq = nullptr;
  transport::Request* sreq = nullptr;
  RESILIENT_TRY(postRecv(pair, asBytes(dst.data()), dst.size(), tag, &rreq));
  RESILIENT_TRY(pair.sendComm->isend(asBytes(src.data()), size, tag, nullptr, nullptr, &sreq));
  if (rreq == nullptr || sreq == nullptr) {
    return internalError(what + ": a request was refused (null request)");
  }
  int sendSize = -1;
  int recvSizes[1] = {-1};
  int sendDone = 0;
  int recvDone = 0;
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  while (sendDone == 0 || recvDone == 0) {
    if (sendDone == 0) {
      RESILIENT_TRY(sreq->test(&sendDone, &sendSize));
    }
    if (recvDone == 0) {
      RESILIENT_TRY(rreq->test(&recvDone, recvSizes));
    }
    if (monotonicMs() > deadline) {
      return timeoutError(what + ": the round trip did not complete");
    }
  }
  if (sendSize != static_cast<int>(size) || recvSizes[0] != static_cast<int>(size)) {
    return internalError(what + ": test() reported " + std::to_string(sendSize) + " sent and " +
                         std::to_string(recvSizes[0]) + " received");
  }
  if (const int64_t bad = checkPattern(dst.data(), size, seed); bad >= 0) {
    return internalError(what + ": byte " + std::to_string(bad) + " differs");
  }
  if (dst[size] != 0xee) {
    return internalError(what + ": a byte was written beyond the message");
  }
  return {};
}

void fillPattern(std::vector<uint8_t>* buf, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (uint8_t& b : *buf) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
}

int64_t checkPattern(const uint8_t* data, size_t size, uint32_t seed) {
  std::vector<uint8_t> expected(size);
  fillPattern(&expected, seed);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != expected[i]) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

namespace {

// What anyRequest() points to.
class NeverTested final : public transport::Request {
 public:
  virtual ~NeverTested() = default;
  Status test(int* done, int* sizes) override {
    (void)sizes;
    *done = 0;
    return internalError("test: anyRequest() was tested");
  }
};

}  // namespace

transport::Request* anyRequest() {
  static NeverTested request;
  return &request;
}

}  // namespace resilient::test
