// Tests of the counter-based generator (detail/philox.hpp) against Random123, of QSGD's two
// random streams against references built from Random123's words, and of CRC-32
// (detail/crc32.hpp) against zlib: all are independent implementations.
// sparsepush before Random123: the other way round, GCC 12 reports a false maybe-uninitialized
// inside its own AVX-512 intrinsics (_mm256_undefined_pd) in the library's kernels
#include <sparsepush/detail/crc32.hpp>
#include <sparsepush/detail/philox.hpp>
#include <sparsepush/sparsepush.hpp>

#include <Random123/philox.h>
#include <zlib.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

using namespace sparsepush;

TEST_CASE("Philox4x32-10 matches Random123 bit for bit", "[compress]") {
  std::mt19937_64 gen(12345);
  r123::Philox4x32 ref;
  for (int trial = 0; trial < 2000; ++trial) {
    r123::Philox4x32::ctr_type c;
    r123::Philox4x32::key_type k;
    detail::philox_counter ours_c{};
    detail::philox_key ours_k{};
    for (int i = 0; i < 4; ++i) c.v[i] = ours_c[i] = static_cast<std::uint32_t>(gen());
    for (int i = 0; i < 2; ++i) k.v[i] = ours_k[i] = static_cast<std::uint32_t>(gen());
    const auto r = ref(c, k);
    const auto o = detail::philox4x32_10(ours_c, ours_k);
    for (int i = 0; i < 4; ++i) REQUIRE(r.v[i] == o[i]);
  }
}

TEST_CASE("Philox4x32-7 matches Random123's philox4x32_R(7, ...) bit for bit", "[compress]") {
  std::mt19937_64 gen(777);
  for (int trial = 0; trial < 2000; ++trial) {
    r123::Philox4x32::ctr_type c;
    r123::Philox4x32::key_type k;
    detail::philox_counter ours_c{};
    detail::philox_key ours_k{};
    for (int i = 0; i < 4; ++i) c.v[i] = ours_c[i] = static_cast<std::uint32_t>(gen());
    for (int i = 0; i < 2; ++i) k.v[i] = ours_k[i] = static_cast<std::uint32_t>(gen());
    const auto r = philox4x32_R(7, c, k);
    const auto o = detail::philox4x32_n<7>(ours_c, ours_k);
    for (int i = 0; i < 4; ++i) REQUIRE(r.v[i] == o[i]);
    // and the stream's block: counter (b, round, node, stream), key (seed low, seed high)
    const std::uint64_t seed = gen();
    const detail::counter_rng rng(seed, ours_c[2], ours_c[1], detail::rng_stream::qsgd);
    r123::Philox4x32::ctr_type bc = {{ours_c[0], ours_c[1], ours_c[2], 2u}};
    r123::Philox4x32::key_type bk = {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
    const auto r7 = philox4x32_R(7, bc, bk), r10 = philox4x32_R(10, bc, bk);
    const auto o7 = rng.block<7>(ours_c[0]), o10 = rng.block(ours_c[0]);
    for (int i = 0; i < 4; ++i) {
      REQUIRE(r7.v[i] == o7[i]);
      REQUIRE(r10.v[i] == o10[i]);
    }
  }
}

namespace {

/// The QSGD levels of a float vector by the rule of values.hpp, with xi from Random123's words
/// (independent of the library's generator and kernels): the counter of coordinate j's block is
/// (block, round, node, 2 = the qsgd stream), the key (seed low, seed high). philox10: the 0.3.3
/// rule, xi = (w_j >> 8) / 2^24, w_j word j % 4 of block j / 4; philox7 with levels <= 256:
/// xi = h_j / 2^16, h_j the 16-bit half j % 2 (low first) of word (j / 2) % 4 of block j / 8;
/// philox7 above 256 levels: the 24-bit rule on 7-round words. Returns code = level << 1 | sign.
std::vector<std::uint32_t> reference_qsgd_codes(const std::vector<float>& v, std::uint16_t levels, bool philox10,
                                                const context& ctx) {
  double sq = 0;  // the test's inputs make this sum exact in any order
  for (const float x : v) sq += double(x) * double(x);
  const float nrm = static_cast<float>(std::sqrt(sq));
  const float s = levels, to_level = s / nrm;
  const bool half = !philox10 && levels <= 256;
  std::vector<std::uint32_t> out;
  for (std::uint32_t j = 0; j < v.size(); ++j) {
    const std::uint32_t block = half ? j / 8 : j / 4;
    r123::Philox4x32::ctr_type c = {{block, ctx.round, ctx.node, 2u}};
    r123::Philox4x32::key_type k = {{static_cast<std::uint32_t>(ctx.seed), static_cast<std::uint32_t>(ctx.seed >> 32)}};
    const auto w = philox4x32_R(philox10 ? 10 : 7, c, k);
    float xi;
    if (half) xi = static_cast<float>((w.v[(j / 2) % 4] >> (16 * (j % 2))) & 0xFFFF) / 65536.0f;
    else xi = static_cast<float>(w.v[j % 4] >> 8) / 16777216.0f;
    volatile float r = std::abs(v[j]) * to_level;  // volatile: no fused multiply-add
    const float fl = std::floor(r);
    float level = fl + (xi < r - fl ? 1.0f : 0.0f);
    level = std::min(level, s);
    out.push_back((static_cast<std::uint32_t>(level) << 1) | (v[j] < 0 ? 1u : 0u));
  }
  return out;
}

/// The codes of a dense QSGD message, read LSB first from its payload (the wire format).
std::vector<std::uint32_t> message_codes(const message& m) {
  const unsigned bits = 1 + static_cast<unsigned>(std::bit_width(m.levels));
  std::vector<std::uint32_t> out;
  for (std::size_t j = 0; j < m.count; ++j) {
    std::uint32_t c = 0;
    for (unsigned b = 0; b < bits; ++b) {
      const std::size_t at = j * bits + b;
      c |= ((std::to_integer<unsigned>(m.payload[at / 8]) >> (at % 8)) & 1u) << b;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace

TEST_CASE("QSGD's philox10 stream gives 0.3.3's bits and philox7 its documented rule, against Random123",
          "[compress][qsgd]") {
  std::mt19937 gen(4242);
  for (const std::size_t d : {1u, 7u, 64u, 129u, 1000u, 4099u}) {
    // multiples of 1/64 below 16: squares and their sum are exact in double, so the norm is
    // the same whatever the order of summation
    std::vector<float> v(d);
    for (auto& x : v) x = static_cast<float>(static_cast<int>(gen() % 2001) - 1000) / 64.0f;
    v[0] = 3.0f;  // never all zero
    for (const std::uint16_t levels : {1, 2, 16, 255, 256, 257, 4000, 32767}) {
      for (const bool philox10 : {true, false}) {
        const context ctx{0x1234567890ABCDEFull + d, 5, 77};
        message m;
        compress(qsgd{levels, philox10 ? qsgd_stream::philox10 : qsgd_stream::philox7}, std::span<const float>(v), m, ctx);
        INFO("d " << d << " levels " << levels << " philox10 " << philox10);
        REQUIRE(message_codes(m) == reference_qsgd_codes(v, levels, philox10, ctx));
        // the generic writer (identity+qsgd) follows the same rule
        compress(identity{{value_encoding::qsgd, levels, philox10 ? qsgd_stream::philox10 : qsgd_stream::philox7}},
                 std::span<const float>(v), m, ctx);
        REQUIRE(message_codes(m) == reference_qsgd_codes(v, levels, philox10, ctx));
      }
    }
  }
}

TEST_CASE("counter_rng is a pure function of (seed, node, round, stream, position)", "[compress]") {
  const detail::counter_rng a(7, 3, 11, detail::rng_stream::qsgd);
  const detail::counter_rng same(7, 3, 11, detail::rng_stream::qsgd);
  const detail::counter_rng other_node(7, 4, 11, detail::rng_stream::qsgd);
  const detail::counter_rng other_round(7, 3, 12, detail::rng_stream::qsgd);
  const detail::counter_rng other_stream(7, 3, 11, detail::rng_stream::random_k);
  int differ_node = 0, differ_round = 0, differ_stream = 0;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    REQUIRE(a.block(i) == same.block(i));
    differ_node += a.block(i) != other_node.block(i);
    differ_round += a.block(i) != other_round.block(i);
    differ_stream += a.block(i) != other_stream.block(i);
  }
  REQUIRE(differ_node == 1000);
  REQUIRE(differ_round == 1000);
  REQUIRE(differ_stream == 1000);
}

TEST_CASE("uniform_int stays in range and is close to uniform", "[compress]") {
  const detail::counter_rng rng(99, 0, 0, detail::rng_stream::random_k);
  std::vector<int> hist(10, 0);
  const int n = 100000;
  for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(n); ++i) {
    const auto v = rng.uniform_int(i, 9);
    REQUIRE(v <= 9);
    ++hist[v];
  }
  // each bin ~ Binomial(n, 0.1): sd ~ 95; 6 sd bound fails for a broken mapping
  for (int h : hist) REQUIRE(std::abs(h - n / 10) < 600);
  REQUIRE(rng.uniform_int(5, 0) == 0);
  for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(rng.uniform_int(i, 0xFFFFFFFFu) <= 0xFFFFFFFFu);
}

TEST_CASE("CRC-32 matches zlib on random buffers of every length up to 300", "[message]") {
  std::mt19937 gen(5);
  std::vector<std::byte> buf;
  for (std::size_t len = 0; len <= 300; ++len) {
    buf.resize(len);
    for (auto& b : buf) b = std::byte(gen() & 0xFF);
    const auto ours = detail::crc32_update(0, buf);
    const auto ref = ::crc32(0L, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(len));
    REQUIRE(ours == ref);
    // chaining over a split equals one pass
    const std::size_t cut = len / 3;
    const auto chained = detail::crc32_update(detail::crc32_update(0, std::span(buf).first(cut)),
                                              std::span(buf).subspan(cut));
    REQUIRE(chained == ref);
  }
}
