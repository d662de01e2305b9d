// The recorder's output: one JSON object per line, appended to
// $RESILIENT_RECORDER_DIR/<kind>-<pid>.jsonl (kind "net" or "profiler").
//
// JsonFields builds the members of one line; JsonlLog adds "t_ns"
// (CLOCK_MONOTONIC, taken under the log's mutex, so the times never go down
// along a file) and "tid", and buffers lines, writing them out when the
// buffer passes 64 KiB and at flush(). The file is opened at the first
// recording() call, never at load time, with O_EXCL|O_NOFOLLOW and mode 0600
// (a name already taken, as after an unload and reload in the same process,
// gets a ".1" ... ".99" suffix). Without RESILIENT_RECORDER_DIR, or when the
// file cannot be opened or written, one message goes to stderr and nothing
// is recorded. After maxLines lines one {"truncated":true} line ends the
// file and recording stops. Nothing here ever affects the calls it records.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

namespace resilient::recorder {

// The members of one JSON object, without the braces. Keys are plain ASCII
// names; string values are escaped (control characters as \uXXXX or their
// short forms, invalid UTF-8 as U+FFFD).
class JsonFields {
 public:
  JsonFields() { text_.reserve(160); }

  // key: value, where value is a bool, an integer, a floating-point number
  // (NaN and infinities as null), or a C string (NULL as null).
  template <class T>
  JsonFields& add(std::string_view name, T v) {
    key(name);
    value(v);
    return *this;
  }
  JsonFields& addNull(std::string_view name) {
    key(name);
    return nullValue();
  }
  // An unsigned 64-bit value as a "0x..." string (comm hashes, GUIDs):
  // exact in every JSON reader.
  JsonFields& addHex(std::string_view name, uint64_t v);
  // A plugin call's ncclResult_t, as "rc": code.
  JsonFields& addResult(int rc) { return add("rc", rc); }
  // A small integer id, with 0 meaning "none" (written as null).
  JsonFields& addId(std::string_view name, uint64_t id) {
    return id == 0 ? addNull(name) : add(name, id);
  }

  // Nested arrays and objects: key(name) then beginArray()/beginObject(),
  // elements with value(), and the matching end.
  JsonFields& key(std::string_view name);
  JsonFields& beginArray() { return open('['); }
  JsonFields& endArray() { return close(']'); }
  JsonFields& beginObject() { return open('{'); }
  JsonFields& endObject() { return close('}'); }

  template <class T>
  JsonFields& value(T v) {
    separate();
    if constexpr (std::is_same_v<T, bool>) {
      text_ += v ? "true" : "false";
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      appendSigned(static_cast<int64_t>(v));
    } else if constexpr (std::is_integral_v<T>) {
      appendUnsigned(static_cast<uint64_t>(v));
    } else if constexpr (std::is_same_v<T, float>) {
      appendFloat(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      appendReal(static_cast<double>(v));
    } else {
      static_assert(std::is_convertible_v<T, const char*>, "unsupported JSON value type");
      appendString(static_cast<const char*>(v));
    }
    return *this;
  }
  JsonFields& nullValue() {
    separate();
    text_ += "null";
    return *this;
  }

  const std::string& text() const { return text_; }

 private:
  JsonFields& open(char bracket);
  JsonFields& close(char bracket);
  void separate();
  void appendSigned(int64_t v);
  void appendUnsigned(uint64_t v);
  void appendReal(double v);
  void appendFloat(float v);         // shortest form that reads back as the same float
  void appendString(const char* s);  // NULL: null

  std::string text_;
  bool afterKey_ = false;
};

// Appends `s` to `out` as a quoted JSON string (exposed for tests).
void appendJsonString(std::string& out, std::string_view s);

class JsonlLog {
 public:
  static constexpr size_t kDefaultMaxLines = 4'000'000;
  static constexpr size_t kFlushBytes = size_t{64} * 1024;

  // kind: "net" or "profiler"; the file name's prefix and the name used in
  // messages. The line cap is RESILIENT_RECORDER_MAX_LINES when that is a
  // positive number, else kDefaultMaxLines.
  explicit JsonlLog(const char* kind) : kind_(kind) {}
  ~JsonlLog();  // writes out what is buffered
  JsonlLog(const JsonlLog&) = delete;
  JsonlLog& operator=(const JsonlLog&) = delete;

  // True while lines are being recorded; opens the file on first use.
  bool recording() {
    const int s = state_.load(std::memory_order_acquire);
    return s == kOpen || (s == kUnopened && openOnce());
  }
  // Appends one line {"t_ns":...,"tid":...,<fields>}; a no-op when not recording.
  void write(const JsonFields& fields);
  // Builds and writes one line {"call":call,...}; `fill(JsonFields&)` adds the
  // members after "call". Recording never disturbs the call recorded: a line
  // that cannot be built (memory) is dropped.
  template <class Fill>
  void record(const char* call, Fill&& fill) noexcept {
    if (!recording()) {
      return;
    }
    try {
      JsonFields f;
      f.add("call", call);
      fill(f);
      write(f);
    } catch (...) {  // NOLINT(bugprone-empty-catch): the line is dropped, the call goes on
    }
  }
  // Writes the buffered lines to the file.
  void flush();

 private:
  enum : int { kUnopened = 0, kOpen = 1, kOff = 2 };

  bool openOnce();
  void openLocked();
  void flushLocked();
  void stopLocked(const std::string& why);  // one message to stderr, recording off

  const char* kind_;
  std::mutex mu_;
  std::atomic<int> state_{kUnopened};
  int fd_ = -1;
  std::string path_;
  std::string buffer_;
  size_t lines_ = 0;
  size_t maxLines_ = kDefaultMaxLines;
};

}  // namespace resilient::recorder
