// Incremental decoding of a byte stream into the protocol's frames: bytes
// arrive in any split (one byte at a time, several frames at once); next()
// yields a frame once all of it is buffered. A header announcing a payload
// over the limit is refused before its payload is awaited or buffered.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "store/tcp/protocol.h"

namespace resilient::store::tcp {

struct Frame {
  FrameHeader header;
  std::string_view payload;  // valid until the next call on the decoder
};

class FrameDecoder {
 public:
  FrameDecoder(size_t maxFrameBytes, FrameKind kind);

  // Space to receive into (at least `min` bytes); then commit() what arrived.
  char* writable(size_t min);
  void commit(size_t n) { end_ += n; }
  void feed(std::string_view bytes);

  // The connection's Hello (server side, before any frame).
  std::optional<Hello> nextHello();
  // The next complete frame; ProtocolError on a malformed header.
  std::optional<Frame> next();

  size_t buffered() const noexcept { return end_ - begin_; }
  // Frees a large buffer once it holds nothing (an idle connection then
  // costs no buffer memory).
  void shrinkIfEmpty();
  void setMaxFrameBytes(size_t n) noexcept { maxFrameBytes_ = n; }

 private:
  std::string_view data() const { return std::string_view(buf_).substr(begin_, end_ - begin_); }

  std::string buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
  size_t maxFrameBytes_;
  FrameKind kind_;
};

}  // namespace resilient::store::tcp
