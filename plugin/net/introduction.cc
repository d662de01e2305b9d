#include "plugin/net/introduction.h"

namespace resilient::net {

Introduction::Introduction(transport::SendComm* send, transport::RecvComm* recv)
    : send_(send),
      recv_(recv),
      comm_(send != nullptr ? static_cast<transport::Comm&>(*send) : *recv),
      side_(send != nullptr ? Side::kConnector : Side::kAcceptor) {}

Introduction::~Introduction() = default;

bool canIntroduce(transport::Transport& inner, int dev) {
  transport::Properties props;
  return inner.properties(dev, &props).ok() && (props.ptrSupport & transport::kPtrHost) != 0;
}

Status Introduction::start(transport::SendComm& comm, const HandleTrailer& ours,
                           std::unique_ptr<Introduction>* out) {
  std::unique_ptr<Introduction> intro(new Introduction(&comm, nullptr));
  encodeTrailer(ours, intro->buffer_);
  return begin(std::move(intro), out);
}

Status Introduction::start(transport::RecvComm& comm, std::unique_ptr<Introduction>* out) {
  return begin(std::unique_ptr<Introduction>(new Introduction(nullptr, &comm)), out);
}

Status Introduction::begin(std::unique_ptr<Introduction> intro,
                           std::unique_ptr<Introduction>* out) {
  const auto failed = [](const Status& s) {
    return Status::error(s.kind(), "introducing the connection in band: " + s.message(),
                         s.sysErrno());
  };
  if (Status s = intro->comm_.regMr(intro->buffer_, sizeof intro->buffer_, transport::kPtrHost,
                                    &intro->region_);
      !s.ok()) {
    return failed(s);
  }
  bool posted = false;
  if (Status s = intro->post(&posted); !s.ok()) {
    intro->release();
    return failed(s);
  }
  *out = std::move(intro);
  return {};
}

Status Introduction::post(bool* posted) noexcept {
  if (!posted_) {
    std::byte* data = buffer_;
    transport::MemoryRegion* region = region_.get();
    if (send_ != nullptr) {
      RESILIENT_TRY(
          send_->isend(data, sizeof buffer_, kIntroductionTag, region, nullptr, &request_));
    } else {
      const size_t size = sizeof buffer_;
      const int tag = kIntroductionTag;
      RESILIENT_TRY(recv_->irecv(1, &data, &size, &tag, &region, nullptr, &request_));
    }
    posted_ = request_ != nullptr;
  }
  *posted = posted_;
  return {};
}

Status Introduction::progress(bool* arrived, HandleTrailer* theirs) noexcept {
  *arrived = false;
  if (done_ || !posted_) {
    return {};
  }
  int complete = 0;
  int size = 0;
  RESILIENT_TRY(request_->test(&complete, &size));
  if (complete == 0) {
    return {};
  }
  done_ = true;
  if (recv_ != nullptr) {
    // An inner transport with irecvConsumed holds each completed receive
    // until it is consumed (NCCL's order: after test() said done): ours is
    // consumed now, before any of NCCL's.
    RESILIENT_TRY(recv_->irecvConsumed(1, request_));
  }
  request_ = nullptr;
  if (side_ == Side::kAcceptor) {
    // A transport that does not report sizes (NCCL tolerates it) still
    // delivered the bytes: the trailer's checksum is the check.
    if (!decodeTrailer(buffer_, theirs)) {
      return remoteError(
          "the peer's first message is not the resilient layer's introduction: both sides "
          "must load the same version of the plugin");
    }
    *arrived = true;
  }
  return {};
}

void Introduction::release() noexcept {
  if (region_ != nullptr) {
    (void)comm_.deregMr(std::move(region_));
  }
}

}  // namespace resilient::net
