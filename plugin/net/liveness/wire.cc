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

// A u16 length and at most `max` bytes of `text`.
void putText(std::string* out, const std::string& text, size_t max) {
  const size_t n = std::min(text.size(), max);
  put<uint16_t>(out, static_cast<uint16_t>(n));
  out->append(text.data(), n);
}

// Reads what putText wrote at body[*at] (within `length`); false when malformed.
bool getText(const char* body, uint32_t length, size_t* at, size_t max, std::string* text) {
  if (*at + 2 > length) {
    return false;
  }
  const auto n = get<uint16_t>(body + *at);
  if (n > max || *at + 2 + n > length) {
    return false;
  }
  text->assign(body + *at + 2, n);
  *at += 2u + n;
  return true;
}

}  // namespace

std::string authTranscript(uint32_t openerPid, const std::string& openerHost, uint32_t acceptorPid,
                           const std::string& acceptorHost) {
  std::string t;
  put<uint32_t>(&t, openerPid);
  putText(&t, openerHost, kMaxHostName);
  put<uint32_t>(&t, acceptorPid);
  putText(&t, acceptorHost, kMaxHostName);
  return t;
}

void encode(const Frame& frame, std::string* out) {
  std::string payload;
  switch (frame.type) {
    case Type::kHello:
    case Type::kChallenge:
      payload.append(reinterpret_cast<const char*>(frame.nonce.data()), frame.nonce.size());
      put<uint32_t>(&payload, frame.pid);
      putText(&payload, frame.host, kMaxHostName);
      if (frame.type == Type::kChallenge) {
        payload.append(reinterpret_cast<const char*>(frame.proof.data()), frame.proof.size());
      }
      break;
    case Type::kProof:
      payload.append(reinterpret_cast<const char*>(frame.proof.data()), frame.proof.size());
      break;
    case Type::kBind:
    case Type::kPing:
    case Type::kPong: put<uint64_t>(&payload, frame.value); break;
    case Type::kGoodbye:
    case Type::kFault:
      if (frame.value != 0) {
        put<uint64_t>(&payload, frame.value);
        put<uint32_t>(&payload, frame.pid);
        if (frame.type == Type::kFault) {
          put<uint64_t>(&payload, frame.commId);
        }
        putText(&payload, frame.host, kMaxHostName);
        putText(&payload, frame.detail, kMaxGoodbyeDetail);
      }
      break;
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
    case Type::kHello:
    case Type::kChallenge: {
      constexpr size_t kFixed = auth::kNonceBytes + 4;
      const size_t tail = f.type == Type::kChallenge ? auth::kProofBytes : 0;
      size_t at = kFixed;
      bool ok = length >= kFixed + 2 + tail;
      if (ok) {
        std::memcpy(f.nonce.data(), body, auth::kNonceBytes);
        f.pid = get<uint32_t>(body + auth::kNonceBytes);
        ok = getText(body, length - static_cast<uint32_t>(tail), &at, kMaxHostName, &f.host) &&
             at + tail == length;
      }
      if (!ok) {
        *error = f.type == Type::kHello ? "malformed hello" : "malformed challenge";
        return Result::kError;
      }
      std::memcpy(f.proof.data(), body + at, tail);
      break;
    }
    case Type::kProof:
      if (length != auth::kProofBytes) {
        *error = "malformed proof";
        return Result::kError;
      }
      std::memcpy(f.proof.data(), body, auth::kProofBytes);
      break;
    case Type::kGoodbye:
    case Type::kFault: {
      if (length == 0 && f.type == Type::kGoodbye) {
        break;  // a plain close
      }
      const bool notice = f.type == Type::kFault;
      size_t at = notice ? 20 : 12;
      bool ok = length >= at + 4;
      if (ok) {
        f.value = get<uint64_t>(body);
        f.pid = get<uint32_t>(body + 8);
        if (notice) {
          f.commId = get<uint64_t>(body + 12);
        }
      }
      ok = ok && f.value != 0 && getText(body, length, &at, kMaxHostName, &f.host) &&
           getText(body, length, &at, kMaxGoodbyeDetail, &f.detail) && at == length;
      if (!ok) {
        *error = f.type == Type::kGoodbye ? "malformed goodbye" : "malformed fault notice";
        return Result::kError;
      }
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
