#include "plugin/net/liveness/wire.h"

#include <algorithm>
#include <cstring>

namespace resilient::net::liveness {
namespace {

template <class T>
void put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

void encode(const Frame& frame, std::string* out) {
  std::string payload;
  switch (frame.type) {
    case Type::kHello: {
      put<uint64_t>(&payload, frame.value);
      put<uint32_t>(&payload, frame.pid);
      const size_t n = std::min(frame.host.size(), kMaxHostName);
      put<uint16_t>(&payload, static_cast<uint16_t>(n));
      payload.append(frame.host.data(), n);
      break;
    }
    case Type::kBind:
    case Type::kPing:
    case Type::kPong: put<uint64_t>(&payload, frame.value); break;
    case Type::kGoodbye:
    case Type::kRefused: break;
  }
  put<uint32_t>(out, kMagic);
  put<uint16_t>(out, kVersion);
  put<uint16_t>(out, static_cast<uint16_t>(frame.type));
  put<uint32_t>(out, static_cast<uint32_t>(payload.size()));
  out->append(payload);
}

Decoder::Result Decoder::next(Frame* frame, std::string* error) {
  if (buffer_.size() < kHeaderSize) {
    return Result::kNeedMore;
  }
  const char* p = buffer_.data();
  if (get<uint32_t>(p) != kMagic) {
    *error = "bad magic";
    return Result::kError;
  }
  if (get<uint16_t>(p + 4) != kVersion) {
    *error = "unsupported protocol version " + std::to_string(get<uint16_t>(p + 4));
    return Result::kError;
  }
  const auto type = get<uint16_t>(p + 6);
  const auto length = get<uint32_t>(p + 8);
  if (length > kMaxPayload) {
    *error =
        "payload of " + std::to_string(length) + " bytes exceeds " + std::to_string(kMaxPayload);
    return Result::kError;
  }
  if (buffer_.size() < kHeaderSize + length) {
    return Result::kNeedMore;
  }
  const char* body = p + kHeaderSize;
  Frame f;
  f.type = static_cast<Type>(type);
  switch (f.type) {
    case Type::kHello: {
      if (length < 14) {
        *error = "short hello";
        return Result::kError;
      }
      f.value = get<uint64_t>(body);
      f.pid = get<uint32_t>(body + 8);
      const auto n = get<uint16_t>(body + 12);
      if (n > kMaxHostName || 14u + n != length) {
        *error = "malformed hello";
        return Result::kError;
      }
      f.host.assign(body + 14, n);
      break;
    }
    case Type::kBind:
    case Type::kPing:
    case Type::kPong:
      if (length != 8) {
        *error = "malformed frame of type " + std::to_string(type);
        return Result::kError;
      }
      f.value = get<uint64_t>(body);
      break;
    case Type::kGoodbye:
    case Type::kRefused:
      if (length != 0) {
        *error = "malformed frame of type " + std::to_string(type);
        return Result::kError;
      }
      break;
    default: *error = "unknown frame type " + std::to_string(type); return Result::kError;
  }
  buffer_.erase(0, kHeaderSize + length);
  *frame = std::move(f);
  return Result::kFrame;
}

}  // namespace resilient::net::liveness
