// sparsepush/checkpoint/format.hpp: the checkpoint format, over bytes. A checkpoint file is
//   magic "SPCKPT\r\n" (8 bytes) | format version u32 | payload length u64 | payload |
//   CRC-32 (IEEE) u32 of every byte before it
// all little-endian. The payload is a sequence of sections, each a 4-character tag followed by
// fields in a fixed order (u32, u64, f64, strings and value arrays, each array with its count and
// element size), written by checkpoint_writer and read back by checkpoint_reader, which checks
// every tag, count, element size and bound: a truncated, corrupted or mismatched file is a
// checkpoint_error naming what was wrong and where, never a crash or a half-restored state.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../config.hpp"
#include "../detail/bytes.hpp"
#include "../detail/crc32.hpp"

namespace sparsepush {
inline namespace v0 {

/// A checkpoint cannot be written, or a file is not a valid checkpoint for this run (truncated,
/// corrupted, another format version, other settings or node count). The text says what and
/// where (file, byte offset, field).
class checkpoint_error : public error {
 public:
  using error::error;
};

/// The first 8 bytes of every checkpoint file: "SPCKPT\r\n".
inline constexpr char checkpoint_magic[8] = {'S', 'P', 'C', 'K', 'P', 'T', '\r', '\n'};
/// The format version written after the magic; a reader refuses any other.
inline constexpr std::uint32_t checkpoint_version = 1;
/// Bytes around the payload: magic, version, length, CRC.
inline constexpr std::size_t checkpoint_overhead = 8 + 4 + 8 + 4;

/// Builds a checkpoint's payload field by field; finish() adds the header and the CRC.
class checkpoint_writer {
 public:
  /// Start a section (exactly 4 characters).
  void section(std::string_view tag) {
    if (tag.size() != 4) throw config_error("checkpoint section tags have 4 characters, got '" + std::string(tag) + "'");
    raw(tag.data(), 4);
  }
  /// Appends v as 4 little-endian bytes.
  void u32(std::uint32_t v) { le(v); }
  /// Appends v as 8 little-endian bytes.
  void u64(std::uint64_t v) { le(v); }
  /// Appends v's IEEE-754 bits as 8 little-endian bytes (exact, NaN payloads included).
  void f64(double v) { le(std::bit_cast<std::uint64_t>(v)); }
  /// Appends s as its length (u64) and its bytes.
  void str(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  /// count u64, element size u8, then the elements (little-endian, as stored on this machine).
  template <class T>
    requires std::is_arithmetic_v<T>
  void values(std::span<const T> v) {
    static_assert(std::endian::native == std::endian::little, "sparsepush checkpoints assume a little-endian host");
    u64(v.size());
    const auto size = static_cast<std::uint8_t>(sizeof(T));
    raw(&size, 1);
    raw(v.data(), v.size_bytes());
  }
  /// values(std::span) over a vector.
  template <class T>
    requires std::is_arithmetic_v<T>
  void values(const std::vector<T>& v) {
    values(std::span<const T>(v));
  }

  /// The payload written so far (no header, no CRC).
  const std::vector<std::byte>& payload() const noexcept { return buf_; }
  /// The whole file: header, payload, CRC.
  std::vector<std::byte> finish() const {
    std::vector<std::byte> out(checkpoint_overhead + buf_.size());
    std::memcpy(out.data(), checkpoint_magic, 8);
    detail::store_le(out.data() + 8, checkpoint_version);
    detail::store_le(out.data() + 12, static_cast<std::uint64_t>(buf_.size()));
    if (!buf_.empty()) std::memcpy(out.data() + 20, buf_.data(), buf_.size());
    const std::uint32_t crc = detail::crc32_update(0, std::span<const std::byte>(out.data(), 20 + buf_.size()));
    detail::store_le(out.data() + 20 + buf_.size(), crc);
    return out;
  }

 private:
  template <class U>
  void le(U v) {
    std::byte b[sizeof(U)];
    detail::store_le(b, v);
    raw(b, sizeof(U));
  }
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  std::vector<std::byte> buf_;
};

/// Reads a checkpoint file: the constructor checks magic, version, length and CRC; every read
/// checks its bounds and throws checkpoint_error naming the field and the offset.
class checkpoint_reader {
 public:
  /// `file` must outlive the reader; `name` (a path) is used in error messages.
  explicit checkpoint_reader(std::span<const std::byte> file, std::string name = "checkpoint")
      : name_(std::move(name)) {
    if (file.size() < checkpoint_overhead)
      fail("is " + std::to_string(file.size()) + " bytes, shorter than the " + std::to_string(checkpoint_overhead) +
           "-byte frame (truncated?)");
    if (std::memcmp(file.data(), checkpoint_magic, 8) != 0) fail("is not a sparsepush checkpoint (bad magic)");
    const auto version = detail::load_le<std::uint32_t>(file.data() + 8);
    if (version != checkpoint_version)
      fail("has format version " + std::to_string(version) + ", this build reads version " +
           std::to_string(checkpoint_version));
    const auto length = detail::load_le<std::uint64_t>(file.data() + 12);
    if (length != file.size() - checkpoint_overhead)
      fail("announces a " + std::to_string(length) + "-byte payload but holds " +
           std::to_string(file.size() - checkpoint_overhead) + " bytes (truncated or extended)");
    const std::uint32_t want = detail::load_le<std::uint32_t>(file.data() + 20 + length);
    const std::uint32_t got = detail::crc32_update(0, file.first(20 + length));
    if (want != got) fail("fails its CRC-32 check (corrupted)");
    data_ = file.subspan(20, length);
  }

  /// The reader keeps a view of the bytes: a temporary buffer would dangle.
  explicit checkpoint_reader(std::vector<std::byte>&&, std::string = {}) = delete;

  /// The name errors give the checkpoint (its file name, or "checkpoint").
  const std::string& name() const noexcept { return name_; }
  /// The payload offset of the next field.
  std::size_t offset() const noexcept { return pos_; }
  /// Payload bytes not read yet.
  std::size_t remaining() const noexcept { return data_.size() - pos_; }

  /// Expect a section with this tag.
  void section(std::string_view tag) {
    need(4, "section '" + std::string(tag) + "'");
    if (std::memcmp(data_.data() + pos_, tag.data(), 4) != 0)
      fail("has section '" + std::string(reinterpret_cast<const char*>(data_.data() + pos_), 4) + "' at byte " +
           std::to_string(pos_ + 20) + " where '" + std::string(tag) + "' was expected");
    pos_ += 4;
  }
  /// The tag of the section that comes next ("" when fewer than 4 bytes are left), read without
  /// moving on: a reader can name a section of an older layout instead of misreading it.
  std::string next_tag() const {
    if (remaining() < 4) return {};
    return std::string(reinterpret_cast<const char*>(data_.data() + pos_), 4);
  }
  /// Reads a u32; checkpoint_error naming `what` when the payload ends first.
  std::uint32_t u32(std::string_view what) { return scalar<std::uint32_t>(what); }
  /// Reads a u64; checkpoint_error naming `what` when the payload ends first.
  std::uint64_t u64(std::string_view what) { return scalar<std::uint64_t>(what); }
  /// Reads an f64 (its exact bits); checkpoint_error naming `what` when the payload ends first.
  double f64(std::string_view what) { return std::bit_cast<double>(scalar<std::uint64_t>(what)); }
  /// Reads a string written by checkpoint_writer::str; checkpoint_error naming `what` when it is
  /// longer than max bytes or the payload ends first.
  std::string str(std::string_view what, std::size_t max = std::size_t{1} << 20) {
    const std::uint64_t n = u64(what);
    if (n > max) fail("holds a " + std::string(what) + " of " + std::to_string(n) + " bytes (at most " + std::to_string(max) + ")");
    need(static_cast<std::size_t>(n), what);
    std::string s(reinterpret_cast<const char*>(data_.data() + pos_), static_cast<std::size_t>(n));
    pos_ += static_cast<std::size_t>(n);
    return s;
  }
  /// Exactly out.size() elements of type T into out.
  template <class T>
    requires std::is_arithmetic_v<T>
  void values(std::span<T> out, std::string_view what) {
    const std::size_t n = value_header<T>(what);
    if (n != out.size())
      fail("holds " + std::to_string(n) + " elements of " + std::string(what) + " where " + std::to_string(out.size()) +
           " were expected (another model size?)");
    if (n) std::memcpy(out.data(), data_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
  }
  /// A vector of T of any length up to max.
  template <class T>
    requires std::is_arithmetic_v<T>
  std::vector<T> values(std::string_view what, std::size_t max) {
    const std::size_t n = value_header<T>(what);
    if (n > max)
      fail("holds " + std::to_string(n) + " elements of " + std::string(what) + " (at most " + std::to_string(max) + ")");
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), data_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  /// Throw unless every byte was read.
  void done() const {
    if (pos_ != data_.size())
      fail("has " + std::to_string(data_.size() - pos_) + " unread bytes after its last field");
  }
  /// Throw checkpoint_error "<name> <what>".
  [[noreturn]] void fail(const std::string& what) const { throw checkpoint_error(name_ + " " + what); }

 private:
  void need(std::size_t n, std::string_view what) const {
    if (n > data_.size() - pos_)
      fail("ends at byte " + std::to_string(data_.size() + 20) + " inside " + std::string(what) + " (truncated?)");
  }
  template <class U>
  U scalar(std::string_view what) {
    need(sizeof(U), what);
    const U v = detail::load_le<U>(data_.data() + pos_);
    pos_ += sizeof(U);
    return v;
  }
  template <class T>
  std::size_t value_header(std::string_view what) {
    const std::uint64_t n = u64(what);
    need(1, what);
    const auto size = std::to_integer<std::uint8_t>(data_[pos_]);
    ++pos_;
    if (size != sizeof(T))
      fail("stores " + std::string(what) + " with " + std::to_string(size) + "-byte elements, this build uses " +
           std::to_string(sizeof(T)) + " (another element type?)");
    if (n > remaining() / sizeof(T)) need(remaining() + 1, what);  // count beyond the file: truncated
    return static_cast<std::size_t>(n);
  }

  std::span<const std::byte> data_;
  std::size_t pos_ = 0;
  std::string name_;
};

}  // namespace v0
}  // namespace sparsepush
