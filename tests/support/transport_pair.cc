#include "tests/support/transport_pair.h"

#include <time.h>

#include <thread>

namespace resilient::test {

uint64_t monotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

TransportPair::~TransportPair() {
  if (sendComm != nullptr) {
    (void)sender->closeSend(sendComm);
  }
  if (recvComm != nullptr) {
    (void)receiver->closeRecv(recvComm);
  }
  if (listenComm != nullptr) {
    (void)receiver->closeListen(listenComm);
  }
}

Status connectPair(transport::Transport* sender, void* senderCtx, transport::Transport* receiver,
                   void* receiverCtx, TransportPair* pair, int timeoutMs) {
  pair->sender = sender;
  pair->receiver = receiver;
  pair->senderCtx = senderCtx;
  pair->receiverCtx = receiverCtx;
  RESILIENT_TRY(receiver->listen(receiverCtx, 0, pair->handle, &pair->listenComm));
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  while (pair->sendComm == nullptr || pair->recvComm == nullptr) {
    if (pair->sendComm == nullptr) {
      RESILIENT_TRY(sender->connect(senderCtx, 0, pair->handle, &pair->sendComm));
    }
    if (pair->recvComm == nullptr) {
      RESILIENT_TRY(receiver->accept(pair->listenComm, &pair->recvComm));
    }
    if (monotonicMs() > deadline) {
      return timeoutError("connect/accept did not complete");
    }
    std::this_thread::yield();
  }
  return {};
}

Status waitRequest(transport::Transport* t, void* request, int* sizes, int timeoutMs) {
  const uint64_t deadline = monotonicMs() + static_cast<uint64_t>(timeoutMs);
  int done = 0;
  while (done == 0) {
    RESILIENT_TRY(t->test(request, &done, sizes));
    if (done == 0 && monotonicMs() > deadline) {
      return timeoutError("request did not complete");
    }
  }
  return {};
}

}  // namespace resilient::test
