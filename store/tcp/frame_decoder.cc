#include "store/tcp/frame_decoder.h"

#include <cstring>

namespace resilient::store::tcp {

FrameDecoder::FrameDecoder(size_t maxFrameBytes, FrameKind kind)
    : maxFrameBytes_(maxFrameBytes), kind_(kind) {}

char* FrameDecoder::writable(size_t min) {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  }
  if (buf_.size() - end_ < min) {
    // Move the unread bytes to the front, then grow if that is not enough.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (buf_.size() - end_ < min) {
      buf_.resize(end_ + min);
    }
  }
  return buf_.data() + end_;
}

void FrameDecoder::feed(std::string_view bytes) {
  char* dst = writable(bytes.size());
  if (!bytes.empty()) {
    std::memcpy(dst, bytes.data(), bytes.size());
  }
  commit(bytes.size());
}

void FrameDecoder::shrinkIfEmpty() {
  if (begin_ == end_ && buf_.size() > 4096) {
    std::string().swap(buf_);
    begin_ = end_ = 0;
  }
}

std::optional<Hello> FrameDecoder::nextHello() {
  size_t consumed = 0;
  std::optional<Hello> hello = decodeHello(data(), &consumed);
  if (hello) {
    begin_ += consumed;
  }
  return hello;
}

std::optional<Frame> FrameDecoder::next() {
  const std::string_view in = data();
  if (in.size() < kFrameHeaderBytes) {
    return std::nullopt;
  }
  const FrameHeader h = decodeFrameHeader(in, maxFrameBytes_, kind_);
  if (in.size() - kFrameHeaderBytes < h.length) {
    return std::nullopt;
  }
  Frame f{h, in.substr(kFrameHeaderBytes, h.length)};
  begin_ += kFrameHeaderBytes + h.length;
  return f;
}

}  // namespace resilient::store::tcp
