// How the structured fuzz targets read their bytes, with the writers make_corpus uses, so that
// the seed corpus and the targets cannot disagree on the layout. Every byte string is a valid
// input (short ones read as zeros), so every mutation reaches the library.
//   compress: flags u8 | (d - 1) mod 4096 u16 | seed u16 | node u8 | round u8 | spec '\n' | value bytes
//   schedule: (n - 1) mod 32 u8 | seed u16 | spec (up to a NUL)
//   idx:      mode u8 (0: one file, read both ways; 1: images u16 length, images, labels) | bytes
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sparsepush_fuzz {

/// Reads fields from the front of the input; past its end every field is zero.
class byte_reader {
 public:
  explicit byte_reader(std::span<const std::uint8_t> in) : in_(in) {}
  std::uint8_t u8() { return at_ < in_.size() ? in_[at_++] : 0; }
  std::uint16_t u16() {
    const unsigned lo = u8();
    return static_cast<std::uint16_t>(lo | (unsigned{u8()} << 8));
  }
  /// Up to (not including) the first `stop`, which is consumed; the rest if there is none.
  std::string_view until(std::uint8_t stop) {
    const auto rest = in_.subspan(std::min(at_, in_.size()));
    const auto it = std::find(rest.begin(), rest.end(), stop);
    const std::size_t len = static_cast<std::size_t>(it - rest.begin());
    at_ += len + (it != rest.end() ? 1 : 0);
    return {reinterpret_cast<const char*>(rest.data()), len};
  }
  std::span<const std::uint8_t> rest() const { return in_.subspan(std::min(at_, in_.size())); }

 private:
  std::span<const std::uint8_t> in_;
  std::size_t at_ = 0;
};

inline void put_u8(std::vector<std::uint8_t>& out, unsigned v) { out.push_back(static_cast<std::uint8_t>(v)); }
inline void put_u16(std::vector<std::uint8_t>& out, unsigned v) {
  put_u8(out, v & 0xFF);
  put_u8(out, (v >> 8) & 0xFF);
}
/// Append bytes (resize and copy: GCC 12 at -O3 warns falsely, -Wstringop-overflow, on the
/// vector::insert this replaces).
inline void put_bytes(std::vector<std::uint8_t>& out, const void* p, std::size_t n) {
  if (n == 0) return;
  const std::size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}
inline void put_bytes(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> b) { put_bytes(out, b.data(), b.size()); }
inline void put_text(std::vector<std::uint8_t>& out, std::string_view s) { put_bytes(out, s.data(), s.size()); }

// --- compress --------------------------------------------------------------------------------

/// flags: bit 0 double (else float); bit 1 raw IEEE float bits, 4 bytes a value (NaN, Inf,
/// subnormals, huge), else int16 times 2^(exponent - 24) (finite, many ties); bit 2 also run
/// error feedback; bits 3..7 the exponent (0 .. 31).
struct compress_input {
  std::uint8_t flags = 0;
  std::uint32_t d = 1;  ///< 1 .. 4096: enough for threshold's sampling path (k >= 2048)
  std::uint16_t seed = 0;
  std::uint8_t node = 0, round = 0;
  std::string_view spec;
  std::span<const std::uint8_t> values;  ///< repeated cyclically to fill d

  bool use_double() const { return flags & 1u; }
  bool raw_floats() const { return flags & 2u; }
  bool feedback() const { return flags & 4u; }

  static compress_input read(std::span<const std::uint8_t> in) {
    byte_reader r(in);
    compress_input c;
    c.flags = r.u8();
    c.d = 1u + r.u16() % 4096u;  // a larger d only slows every run down
    c.seed = r.u16();
    c.node = r.u8();
    c.round = r.u8();
    c.spec = r.until('\n');
    c.values = r.rest();
    return c;
  }

  /// The d input values, as T.
  template <class T>
  std::vector<T> vector() const {
    std::vector<T> x(d, T(0));
    const std::size_t width = raw_floats() ? 4 : 2;
    const std::size_t n = values.size() / width;
    if (n == 0) return x;
    const int exponent = static_cast<int>(flags >> 3) - 24;
    for (std::size_t i = 0; i < d; ++i) {
      const std::uint8_t* p = values.data() + width * (i % n);
      if (raw_floats()) {
        float f;
        std::memcpy(&f, p, 4);
        x[i] = static_cast<T>(f);
      } else {
        const auto code = static_cast<std::int16_t>(static_cast<std::uint16_t>(p[0] | (p[1] << 8)));
        x[i] = static_cast<T>(std::ldexp(static_cast<double>(code), exponent));
      }
    }
    return x;
  }

  static std::vector<std::uint8_t> write(std::uint8_t flags, std::uint32_t d, std::uint16_t seed, std::uint8_t node,
                                         std::uint8_t round, std::string_view spec,
                                         std::span<const std::uint8_t> values) {
    std::vector<std::uint8_t> out;
    put_u8(out, flags);
    put_u16(out, d - 1);
    put_u16(out, seed);
    put_u8(out, node);
    put_u8(out, round);
    put_text(out, spec);
    put_u8(out, '\n');
    put_bytes(out, values);
    return out;
  }
};

// --- schedule --------------------------------------------------------------------------------

struct schedule_input {
  std::size_t n = 1;  ///< 1 .. 32: a complete graph's checks stay cheap
  std::uint16_t seed = 0;
  std::string_view spec;

  static schedule_input read(std::span<const std::uint8_t> in) {
    byte_reader r(in);
    schedule_input s;
    s.n = 1u + r.u8() % 32u;
    s.seed = r.u16();
    s.spec = r.until('\0');
    return s;
  }
  static std::vector<std::uint8_t> write(std::size_t n, std::uint16_t seed, std::string_view spec) {
    std::vector<std::uint8_t> out;
    put_u8(out, static_cast<unsigned>(n - 1));
    put_u16(out, seed);
    put_text(out, spec);
    return out;
  }
};

// --- idx -------------------------------------------------------------------------------------

struct idx_input {
  bool pair = false;                     ///< an image file and a label file
  std::span<const std::uint8_t> first;   ///< the one file, or the image file
  std::span<const std::uint8_t> second;  ///< the label file

  static idx_input read(std::span<const std::uint8_t> in) {
    byte_reader r(in);
    idx_input x;
    x.pair = r.u8() & 1u;
    if (!x.pair) {
      x.first = r.rest();
      return x;
    }
    const std::size_t len = r.u16();
    const auto rest = r.rest();
    x.first = rest.first(std::min(len, rest.size()));
    x.second = rest.subspan(x.first.size());
    return x;
  }
  static std::vector<std::uint8_t> write_one(std::span<const std::uint8_t> file) {
    std::vector<std::uint8_t> out;
    put_u8(out, 0);
    put_bytes(out, file);
    return out;
  }
  static std::vector<std::uint8_t> write_pair(std::span<const std::uint8_t> images,
                                              std::span<const std::uint8_t> labels) {
    std::vector<std::uint8_t> out;
    put_u8(out, 1);
    put_u16(out, static_cast<unsigned>(images.size()));
    put_bytes(out, images);
    put_bytes(out, labels);
    return out;
  }
};

}  // namespace sparsepush_fuzz
