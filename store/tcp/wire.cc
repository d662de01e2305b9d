#include "store/tcp/wire.h"

#include "store/errors.h"

namespace resilient::store::tcp {

void WireWriter::putLe(uint64_t v, int n) {
  char buf[8];
  for (int i = 0; i < n; ++i) {
    buf[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  }
  out_.append(buf, static_cast<size_t>(n));
}

void WireWriter::bytes(std::string_view v) {
  u32(static_cast<uint32_t>(v.size()));
  out_.append(v);
}

uint64_t WireReader::getLe(int n) {
  if (remaining() < static_cast<size_t>(n)) {
    throw ProtocolError("truncated field: needs " + std::to_string(n) + " bytes, " +
                        std::to_string(remaining()) + " left");
  }
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + static_cast<size_t>(i)])) << (8 * i);
  }
  pos_ += static_cast<size_t>(n);
  return v;
}

uint8_t WireReader::u8() {
  return static_cast<uint8_t>(getLe(1));
}

bool WireReader::boolean() {
  const uint8_t v = u8();
  if (v > 1) {
    throw ProtocolError("boolean field holds " + std::to_string(v));
  }
  return v == 1;
}

std::string_view WireReader::raw(size_t n) {
  if (remaining() < n) {
    throw ProtocolError("truncated field: needs " + std::to_string(n) + " bytes, " +
                        std::to_string(remaining()) + " left");
  }
  std::string_view out = in_.substr(pos_, n);
  pos_ += n;
  return out;
}

std::string_view WireReader::bytes(size_t limit, const char* what) {
  const uint32_t n = u32();
  if (n > limit) {
    throw ProtocolError(std::string(what) + " of " + std::to_string(n) +
                        " bytes exceeds the limit of " + std::to_string(limit));
  }
  return raw(n);
}

uint32_t WireReader::count(size_t minItemBytes, size_t limit, const char* what) {
  const uint32_t n = u32();
  if (n > limit) {
    throw ProtocolError(std::string(what) + ": " + std::to_string(n) +
                        " items exceed the limit of " + std::to_string(limit));
  }
  if (minItemBytes > 0 && static_cast<uint64_t>(n) * minItemBytes > remaining()) {
    throw ProtocolError(std::string(what) + ": " + std::to_string(n) + " items cannot fit in the " +
                        std::to_string(remaining()) + " bytes left");
  }
  return n;
}

void WireReader::expectEnd(const char* what) const {
  if (remaining() != 0) {
    throw ProtocolError(std::string(what) + ": " + std::to_string(remaining()) +
                        " unexpected trailing bytes");
  }
}

}  // namespace resilient::store::tcp
