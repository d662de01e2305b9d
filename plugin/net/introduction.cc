#include "plugin/net/introduction.h"

namespace resilient::net {

Introduction::Introduction(transport::Transport& inner, void* innerComm, Side side)
    : inner_(inner), comm_(innerComm), side_(side) {}

Introduction::~Introduction() = default;

bool canIntroduce(transport::Transport& inner, int dev) {
  transport::Properties props;
  return inner.properties(dev, &props).ok() && (props.ptrSupport & transport::kPtrHost) != 0;
}

Status Introduction::start(transport::Transport& inner, void* innerComm, Side side,
                           const HandleTrailer& ours, std::unique_ptr<Introduction>* out) {
  const auto failed = [](const Status& s) {
    return Status::error(s.kind(), "introducing the connection in band: " + s.message(),
                         s.sysErrno());
  };
  std::unique_ptr<Introduction> intro(new Introduction(inner, innerComm, side));
  if (side == Side::kConnector) {
    encodeTrailer(ours, intro->buffer_);
  }
  if (Status s = inner.regMr(innerComm, intro->buffer_, sizeof intro->buffer_,
                             transport::kPtrHost, &intro->mhandle_);
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
    void* data = buffer_;
    if (side_ == Side::kConnector) {
      RESILIENT_TRY(inner_.isend(comm_, data, sizeof buffer_, kIntroductionTag, mhandle_, nullptr,
                                 &request_));
    } else {
      const size_t size = sizeof buffer_;
      const int tag = kIntroductionTag;
      RESILIENT_TRY(inner_.irecv(comm_, 1, &data, &size, &tag, &mhandle_, nullptr, &request_));
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
  RESILIENT_TRY(inner_.test(request_, &complete, &size));
  if (complete == 0) {
    return {};
  }
  done_ = true;
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
  if (mhandle_ != nullptr) {
    (void)inner_.deregMr(comm_, mhandle_);
    mhandle_ = nullptr;
  }
}

}  // namespace resilient::net
