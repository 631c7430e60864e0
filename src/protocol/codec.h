// Little-endian byte writer/reader used by the message codecs. Reader methods never read past
// the end: they return false and leave the reader failed instead.
#ifndef CAIRN_PROTOCOL_CODEC_H_
#define CAIRN_PROTOCOL_CODEC_H_

#include <cstdint>
#include <bit>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

namespace cairn::protocol {

class ByteWriter {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U16(uint16_t v) { Raw(v); }
  void U32(uint32_t v) { Raw(v); }
  void U64(uint64_t v) { Raw(v); }
  // Strings longer than 65535 bytes are a caller bug; callers validate first.
  void Str(std::string_view s) {
    U16(static_cast<uint16_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  // Raw bytes, no length (the caller wrote it).
  void Bytes(std::span<const char> b) { out_.append(b.data(), b.size()); }
  std::string Take() { return std::move(out_); }

 private:
  template <typename T>
  void Raw(T v) {
    static_assert(std::endian::native == std::endian::little, "little-endian hosts only");
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    out_.append(b, sizeof(T));
  }
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const char> in) : in_(in) {}
  bool U8(uint8_t* v) { return Raw(v); }
  bool U16(uint16_t* v) { return Raw(v); }
  bool U32(uint32_t* v) { return Raw(v); }
  bool U64(uint64_t* v) { return Raw(v); }
  bool Str(std::string* s) {
    uint16_t n = 0;
    if (!U16(&n) || in_.size() - pos_ < n) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  // `n` raw bytes.
  bool Bytes(std::string* s, size_t n) {
    if (in_.size() - pos_ < n) return false;
    s->assign(in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  size_t position() const { return pos_; }
  size_t remaining() const { return in_.size() - pos_; }

 private:
  template <typename T>
  bool Raw(T* v) {
    if (in_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  std::span<const char> in_;
  size_t pos_ = 0;
};

}  // namespace cairn::protocol

#endif  // CAIRN_PROTOCOL_CODEC_H_
