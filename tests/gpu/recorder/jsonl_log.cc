#include "tests/gpu/recorder/jsonl_log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

namespace resilient::recorder {
namespace {

template <class T>
void appendNumber(std::string& out, T v) {
  std::array<char, 32> digits{};
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc()) {
    out += "null";
    return;
  }
  out.append(digits.data(), end);
}

// Length of the valid UTF-8 sequence at s[i..], or 0 when it is not one
// (stray continuation byte, truncated sequence, overlong form, surrogate,
// or a code point above U+10FFFF).
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  size_t len = 0;
  uint32_t cp = 0;
  if (lead >= 0xc2 && lead <= 0xdf) {
    len = 2;
    cp = lead & 0x1fu;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    len = 3;
    cp = lead & 0x0fu;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    len = 4;
    cp = lead & 0x07u;
  } else {
    return 0;
  }
  if (i + len > s.size()) {
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xc0u) != 0x80u) {
      return 0;
    }
    cp = (cp << 6) | (byte(i + k) & 0x3fu);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xd800 && cp <= 0xdfff;
  if (overlong || surrogate || cp > 0x10ffff) {
    return 0;
  }
  return len;
}

uint64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

pid_t threadId() {
  thread_local const pid_t tid = gettid();
  return tid;
}

// RESILIENT_RECORDER_MAX_LINES when it is a positive number, else `fallback`.
size_t maxLinesFromEnvironment(size_t fallback) {
  const char* text = getenv("RESILIENT_RECORDER_MAX_LINES");  // NOLINT(concurrency-mt-unsafe)
  if (text == nullptr || *text == '\0') {
    return fallback;
  }
  size_t value = 0;
  const char* end = text + std::string_view(text).size();
  const auto [ptr, ec] = std::from_chars(text, end, value);
  return ec == std::errc() && ptr == end && value > 0 ? value : fallback;
}

std::string errnoText(int err) {
  return std::error_code(err, std::generic_category()).message();
}

}  // namespace

void appendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t len = utf8SequenceLength(s, i);
      if (len == 0) {
        out += "\\ufffd";  // not UTF-8: the replacement character
        ++i;
      } else {
        out.append(s.substr(i, len));
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xf];
        } else {
          out += static_cast<char>(c);
        }
        break;
    }
    ++i;
  }
  out += '"';
}

// ---- JsonFields ------------------------------------------------------------

void JsonFields::separate() {
  if (afterKey_) {
    afterKey_ = false;
    return;
  }
  if (!text_.empty() && text_.back() != '[' && text_.back() != '{') {
    text_ += ',';
  }
}

JsonFields& JsonFields::key(std::string_view name) {
  separate();
  appendJsonString(text_, name);
  text_ += ':';
  afterKey_ = true;
  return *this;
}

JsonFields& JsonFields::open(char bracket) {
  separate();
  text_ += bracket;
  return *this;
}

JsonFields& JsonFields::close(char bracket) {
  text_ += bracket;
  return *this;
}

JsonFields& JsonFields::addHex(std::string_view name, uint64_t v) {
  key(name);
  separate();
  std::array<char, 20> digits{};
  const auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), v, 16);
  text_ += "\"0x";
  text_.append(digits.data(), ec == std::errc() ? end : digits.data());
  text_ += '"';
  return *this;
}

void JsonFields::appendSigned(int64_t v) {
  appendNumber(text_, v);
}

void JsonFields::appendUnsigned(uint64_t v) {
  appendNumber(text_, v);
}

void JsonFields::appendReal(double v) {
  if (!std::isfinite(v)) {
    text_ += "null";
    return;
  }
  appendNumber(text_, v);
}

void JsonFields::appendFloat(float v) {
  if (!std::isfinite(v)) {
    text_ += "null";
    return;
  }
  appendNumber(text_, v);
}

void JsonFields::appendString(const char* s) {
  if (s == nullptr) {
    text_ += "null";
    return;
  }
  appendJsonString(text_, s);
}

// ---- JsonlLog --------------------------------------------------------------

JsonlLog::~JsonlLog() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_ >= 0) {
    flushLocked();
    if (fd_ >= 0) {
      close(fd_);
      fd_ = -1;
    }
  }
}

bool JsonlLog::openOnce() {
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load(std::memory_order_relaxed) == kUnopened) {
    openLocked();
  }
  return state_.load(std::memory_order_relaxed) == kOpen;
}

void JsonlLog::openLocked() {
  maxLines_ = maxLinesFromEnvironment(kDefaultMaxLines);
  const char* dir = getenv("RESILIENT_RECORDER_DIR");  // NOLINT(concurrency-mt-unsafe)
  if (dir == nullptr || *dir == '\0') {
    stopLocked("RESILIENT_RECORDER_DIR is not set");
    return;
  }
  const std::string stem = std::string(dir) + "/" + kind_ + "-" + std::to_string(getpid());
  for (int n = 0; n < 100; ++n) {
    path_ = stem;
    if (n > 0) {
      path_ += '.';
      path_ += std::to_string(n);
    }
    path_ += ".jsonl";
    const int fd =
        ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      fd_ = fd;
      buffer_.reserve(kFlushBytes + 4096);
      state_.store(kOpen, std::memory_order_release);
      return;
    }
    if (errno != EEXIST) {
      stopLocked("cannot create " + path_ + ": " + errnoText(errno));
      return;
    }
  }
  stopLocked("cannot create " + stem + ".jsonl: it and the names " + stem + ".1.jsonl to " + stem +
             ".99.jsonl exist");
}

void JsonlLog::stopLocked(const std::string& why) {
  state_.store(kOff, std::memory_order_release);
  buffer_.clear();
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  std::fprintf(stderr, "nccl-resilient recorder: %s calls are forwarded but not recorded: %s\n",
               kind_, why.c_str());
}

void JsonlLog::write(const JsonFields& fields) {
  if (!recording()) {
    return;
  }
  const pid_t tid = threadId();
  std::lock_guard<std::mutex> lock(mu_);
  if (state_.load(std::memory_order_relaxed) != kOpen) {
    return;
  }
  const auto head = [&] {
    buffer_ += "{\"t_ns\":";
    appendNumber(buffer_, monotonicNs());
    buffer_ += ",\"tid\":";
    appendNumber(buffer_, tid);
  };
  head();
  if (!fields.text().empty()) {
    buffer_ += ',';
    buffer_ += fields.text();
  }
  buffer_ += "}\n";
  if (++lines_ >= maxLines_) {
    head();
    buffer_ += ",\"truncated\":true,\"lines\":";
    appendNumber(buffer_, lines_);
    buffer_ += "}\n";
    flushLocked();
    if (fd_ >= 0) {
      close(fd_);
      fd_ = -1;
      state_.store(kOff, std::memory_order_release);
      std::fprintf(stderr,
                   "nccl-resilient recorder: %s: %zu lines recorded (the cap, "
                   "RESILIENT_RECORDER_MAX_LINES): recording stopped, calls are still forwarded\n",
                   path_.c_str(), lines_);
    }
    return;
  }
  if (buffer_.size() >= kFlushBytes) {
    flushLocked();
  }
}

void JsonlLog::flush() {
  if (state_.load(std::memory_order_acquire) != kOpen) {
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  flushLocked();
}

void JsonlLog::flushLocked() {
  size_t done = 0;
  while (fd_ >= 0 && done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      stopLocked("writing " + path_ + " failed: " + errnoText(n < 0 ? errno : EIO));
      return;
    }
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
}

}  // namespace resilient::recorder
