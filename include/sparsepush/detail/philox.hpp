// sparsepush/detail/philox.hpp: the Philox4x32-R counter-based generator (Salmon, Moraes,
// Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011), written from the paper's
// definition and checked bit-for-bit against Random123 in tests/test_random.cpp (R = 10, the
// default everywhere, and R = 7, which Random123 lists as Crush-resistant: QSGD's default stream).
// Keeping our own copy means the core headers need no third-party include.
#pragma once

#include <array>
#include <cstdint>

namespace sparsepush {
inline namespace v0 {
namespace detail {

using philox_counter = std::array<std::uint32_t, 4>;
using philox_key = std::array<std::uint32_t, 2>;

inline constexpr std::uint32_t philox_m0 = 0xD2511F53u;
inline constexpr std::uint32_t philox_m1 = 0xCD9E8D57u;
inline constexpr std::uint32_t philox_w0 = 0x9E3779B9u;
inline constexpr std::uint32_t philox_w1 = 0xBB67AE85u;

/// R rounds of Philox4x32 on counter c under key k (Random123's philox4x32_R(R, c, k); not named
/// philox4x32, a macro of Random123's philox.h).
template <int R>
constexpr philox_counter philox4x32_n(philox_counter c, philox_key k) noexcept {
  static_assert(R >= 1 && R <= 16, "Philox4x32 rounds in [1, 16]");
  for (int r = 0; r < R; ++r) {
    if (r > 0) {
      k[0] += philox_w0;
      k[1] += philox_w1;
    }
    const std::uint64_t p0 = std::uint64_t{philox_m0} * c[0];
    const std::uint64_t p1 = std::uint64_t{philox_m1} * c[2];
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<std::uint32_t>(p0)};
  }
  return c;
}

/// Ten rounds of Philox4x32 on counter c under key k.
constexpr philox_counter philox4x32_10(philox_counter c, philox_key k) noexcept { return philox4x32_n<10>(c, k); }

/// Independent streams of one (seed, node, round): each random decision of a compressor uses
/// its own stream tag so that, e.g., random-K's indices and QSGD's rounding never share bits.
enum class rng_stream : std::uint32_t {
  random_k = 1,
  qsgd = 2,
  threshold_sample = 3,
  topology = 4,
  message_loss = 5,
  gradient_quantization = 6,  ///< nn: stochastic rounding of back-propagated errors
  message_delay = 7,          ///< the loopback's delay model (transport/loopback.hpp)
};  // ids below 256: counter_rng::substream uses the stream word's high 24 bits

/// Counter-based random numbers keyed by (seed, node, round, stream); draw(i) is a pure function
/// of its position i, so any thread may draw any position in any order.
class counter_rng {
 public:
  constexpr counter_rng(std::uint64_t seed, std::uint32_t node, std::uint32_t round,
                        rng_stream stream) noexcept
      : key_{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)},
        node_(node),
        round_(round),
        stream_(static_cast<std::uint32_t>(stream)) {}

  /// Four independent 32-bit words for block b (positions 4b .. 4b+3), from R-round Philox.
  template <int R = 10>
  constexpr philox_counter block(std::uint32_t b) const noexcept { return philox4x32_n<R>(counter(b), key_); }

  /// The Philox counter of block b, and the key: what a vector generator needs.
  constexpr philox_counter counter(std::uint32_t b) const noexcept { return {b, round_, node_, stream_}; }
  constexpr philox_key key() const noexcept { return key_; }

  /// The same key, node and round with k (< 2^24) in the stream word's high 24 bits: 2^32 fresh
  /// blocks, disjoint from the stream's own and from every other k (stream ids stay below 256).
  constexpr counter_rng substream(std::uint32_t k) const noexcept {
    counter_rng r = *this;
    r.stream_ |= k << 8;
    return r;
  }

  /// A uniform 64-bit word for position i (two words of block i).
  constexpr std::uint64_t bits64(std::uint32_t i) const noexcept {
    const auto w = block(i);
    return (std::uint64_t{w[0]} << 32) | w[1];
  }

  /// A uniform integer in [0, bound] for position i (bound < 2^32; bias below 2^-32).
  constexpr std::uint32_t uniform_int(std::uint32_t i, std::uint32_t bound) const noexcept {
    return scale_to(bits64(i), bound);
  }

  /// floor(x * (bound + 1) / 2^64): a uniform 64-bit x mapped to [0, bound], as uniform_int does
  /// (for callers that generate the words of many blocks at once).
  static constexpr std::uint32_t scale_to(std::uint64_t x, std::uint32_t bound) noexcept {
    // computed exactly in 64-bit pieces
    const std::uint64_t m = std::uint64_t{bound} + 1;  // <= 2^32
    const std::uint64_t lo = (x & 0xFFFFFFFFu) * m;
    const std::uint64_t hi = (x >> 32) * m;
    return static_cast<std::uint32_t>((hi + (lo >> 32)) >> 32);
  }

 private:
  philox_key key_;
  std::uint32_t node_;
  std::uint32_t round_;
  std::uint32_t stream_;
};

/// A 32-bit word mapped to [0, 1) with 24 bits of resolution (exact in float and double).
constexpr double unit_interval(std::uint32_t w) noexcept {
  return static_cast<double>(w >> 8) * (1.0 / 16777216.0);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
