// Little-endian encoding of the TCP store protocol's fields. WireWriter
// appends to a byte string; WireReader reads from a view and throws
// ProtocolError on any underflow or limit, so a malformed peer can never make
// the reader allocate more than the frame it already holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace resilient::store::tcp {

class WireWriter {
 public:
  explicit WireWriter(std::string& out) : out_(out) {}
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u16(uint16_t v) { putLe(v, 2); }
  void u32(uint32_t v) { putLe(v, 4); }
  void u64(uint64_t v) { putLe(v, 8); }
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  // u32 length, then the bytes.
  void bytes(std::string_view v);
  void raw(std::string_view v) { out_.append(v); }
  size_t size() const { return out_.size(); }

 private:
  void putLe(uint64_t v, int n);
  std::string& out_;
};

class WireReader {
 public:
  explicit WireReader(std::string_view in) : in_(in) {}
  uint8_t u8();
  uint16_t u16() { return static_cast<uint16_t>(getLe(2)); }
  uint32_t u32() { return static_cast<uint32_t>(getLe(4)); }
  uint64_t u64() { return getLe(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  bool boolean();  // u8 that must be 0 or 1
  // u32 length (at most `limit`, else ProtocolError naming `what`), then bytes.
  std::string_view bytes(size_t limit, const char* what);
  std::string_view raw(size_t n);
  // A count of items that each take at least `minItemBytes`: refused when the
  // rest of the payload cannot hold them (no allocation on a lying count).
  uint32_t count(size_t minItemBytes, size_t limit, const char* what);
  size_t remaining() const { return in_.size() - pos_; }
  // ProtocolError unless every byte was consumed.
  void expectEnd(const char* what) const;

 private:
  uint64_t getLe(int n);
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace resilient::store::tcp
