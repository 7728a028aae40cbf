// Tests of the compressors (compress/*.hpp) against naive references and statistical bounds.
#include <catch2/catch.hpp>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <algorithm>
#include <cstring>
#include <limits>
#include <sparsepush/sparsepush.hpp>
#include <sparsepush/train/settings.hpp>
#include <string>
#include <thread>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
template <class T>
std::vector<std::uint32_t> top_k_of(const std::vector<T>& v, std::size_t k) {
  message m;
  compress(top_k{k_spec::count(k)}, std::span<const T>(v), m, {1, 2, 3});
  REQUIRE(m.count == k);
  REQUIRE(m.dim == v.size());
  // values carried are exactly v at the indices (native encoding)
  for (std::size_t j = 0; j < k; ++j) REQUIRE(m.value_at<T>(j) == v[m.indices[j]]);
  return m.indices;
}
}  // namespace

TEMPLATE_TEST_CASE("top-K equals a sort-based reference on many inputs", "[compress]", float, double) {
  using T = TestType;
  // sizes on both sides of the histogram path threshold
  for (std::size_t d : {1u, 2u, 7u, 100u, 5000u, 8193u, 20000u, 70001u}) {
    for (unsigned seed = 0; seed < 3; ++seed) {
      std::vector<std::vector<T>> inputs;
      inputs.push_back(test::gaussian<T>(d, seed));
      auto neg = test::gaussian<T>(d, seed + 10);
      for (auto& x : neg) x = -std::abs(x);
      inputs.push_back(neg);
      std::vector<T> tied(d);  // few distinct magnitudes, both signs: heavy ties
      std::mt19937 g(seed);
      for (auto& x : tied) x = static_cast<T>(static_cast<int>(g() % 7) - 3);
      inputs.push_back(tied);
      inputs.push_back(std::vector<T>(d, T(0)));  // all zero: the first k indices
      std::vector<T> denorm(d);  // denormals mixed with zeros and -0
      for (std::size_t i = 0; i < d; ++i)
        denorm[i] = (i % 3 == 0) ? T(-0.0)
                                 : std::numeric_limits<T>::denorm_min() * static_cast<T>(g() % 1000);
      inputs.push_back(denorm);
      std::vector<T> wide(d);  // magnitudes spanning the exponent range
      for (std::size_t i = 0; i < d; ++i)
        wide[i] = std::ldexp(T(1) + T(g() % 100) / 100, static_cast<int>(g() % 200) - 100);
      inputs.push_back(wide);
      for (const auto& v : inputs)
        for (std::size_t k : {std::size_t{1}, d / 1000 + 1, d / 10 + 1, d / 2 + 1, d}) {
          k = std::min(k, d);
          REQUIRE(top_k_of(v, k) == test::reference_top_k(v, k));
        }
    }
  }
}

TEST_CASE("top-K is a delta-contraction with delta = k/d", "[compress]") {
  for (unsigned seed = 0; seed < 20; ++seed) {
    const std::size_t d = 1000 + 997 * seed;
    const auto v = test::gaussian<double>(d, seed, 0.1 + seed);
    for (double f : {0.001, 0.01, 0.1, 0.5}) {
      message m;
      compress(top_k{k_spec::fraction(f)}, std::span<const double>(v), m, {});
      const auto q = test::dense<double>(m);
      std::vector<double> diff(d);
      for (std::size_t i = 0; i < d; ++i) diff[i] = q[i] - v[i];
      const double delta = static_cast<double>(m.count) / static_cast<double>(d);
      REQUIRE(test::norm2sq(diff) <= (1.0 - delta) * test::norm2sq(v) * (1 + 1e-12));
    }
  }
}

TEST_CASE("k as a fraction rounds to nearest and stays in [1, d]", "[compress]") {
  const context ctx{};
  REQUIRE(k_spec::fraction(0.01).resolve(1000000, ctx) == 10000);
  REQUIRE(k_spec::fraction(0.001).resolve(10, ctx) == 1);
  REQUIRE(k_spec::fraction(1.0).resolve(17, ctx) == 17);
  REQUIRE(k_spec::fraction(0.25).resolve(10, ctx) == 3);  // 2.5 rounds away from zero
  REQUIRE(k_spec::count(5).resolve(5, ctx) == 5);
}

TEST_CASE("bad k and bad inputs are clear errors", "[compress]") {
  std::vector<float> v(10, 1.0f);
  message m;
  const context ctx{0, 4, 9};
  REQUIRE_THROWS_AS(k_spec::count(0), config_error);
  REQUIRE_THROWS_WITH(k_spec::fraction(0.0), Catch::Contains("(0, 1]"));
  REQUIRE_THROWS_WITH(k_spec::fraction(1.5), Catch::Contains("1.5"));
  REQUIRE_THROWS_AS(k_spec::fraction(std::nan("")), config_error);
  REQUIRE_THROWS_WITH(compress(top_k{k_spec::count(11)}, std::span<const float>(v), m, ctx),
                      Catch::Contains("k = 11") && Catch::Contains("d = 10") &&
                          Catch::Contains("node 4, round 9"));
  REQUIRE_THROWS_AS(compress(random_k{k_spec::count(11)}, std::span<const float>(v), m, ctx),
                    config_error);
  REQUIRE_THROWS_AS(compress(top_k{}, std::span<const float>(), m, ctx), size_error);
  REQUIRE_THROWS_AS(compress(qsgd{0}, std::span<const float>(v), m, ctx), config_error);
  REQUIRE(m.dim == 0);  // nothing was written by the failed calls
  REQUIRE(m.indices.empty());
}

TEMPLATE_TEST_CASE("NaN and Inf are errors naming the index, for every compressor", "[compress]", float,
                   double) {
  using T = TestType;
  const std::vector<any_compressor> all = {
      identity{}, top_k{k_spec::count(3)}, random_k{k_spec::count(3)}, threshold_k{k_spec::count(3)},
      qsgd{4}, scaled_sign{}};
  for (std::size_t d : {50u, 20000u}) {  // small and histogram top-K paths
    for (const T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                        -std::numeric_limits<T>::infinity()}) {
      auto v = test::gaussian<T>(d, 3);
      const std::size_t at = d - 7;
      v[at] = bad;
      for (const auto& c : all) {
        message m;
        try {
          compress(c, std::span<const T>(v), m, {0, 2, 5});
          FAIL("no exception");
        } catch (const non_finite_error& e) {
          REQUIRE(e.index() == at);
          const std::string what = e.what();
          REQUIRE(what.find("index " + std::to_string(at)) != std::string::npos);
          REQUIRE(what.find("node 2, round 5") != std::string::npos);
          REQUIRE(what.find(std::isnan(bad) ? "NaN" : "Inf") != std::string::npos);
        }
      }
    }
  }
}

TEST_CASE("random-K picks k distinct coordinates, reproducibly per (seed, node, round)", "[compress]") {
  const auto v = test::gaussian<float>(10000, 1);
  const random_k c{k_spec::count(100)};
  message a, b, other_node, other_round;
  compress(c, std::span<const float>(v), a, {42, 1, 7});
  compress(c, std::span<const float>(v), b, {42, 1, 7});
  compress(c, std::span<const float>(v), other_node, {42, 2, 7});
  compress(c, std::span<const float>(v), other_round, {42, 1, 8});
  REQUIRE(a.count == 100);
  REQUIRE(std::adjacent_find(a.indices.begin(), a.indices.end(), std::greater_equal<>()) ==
          a.indices.end());  // strictly ascending, hence distinct
  REQUIRE(encode(a) == encode(b));
  REQUIRE(a.indices != other_node.indices);
  REQUIRE(a.indices != other_round.indices);
  // the same call from another thread gives the same bits (no hidden thread state)
  message from_thread;
  std::thread([&] { compress(c, std::span<const float>(v), from_thread, {42, 1, 7}); }).join();
  REQUIRE(encode(from_thread) == encode(a));
}

TEST_CASE("random-K: each coordinate is chosen with probability k/d, the unbiased variant has E[q] = v",
          "[compress]") {
  const std::size_t d = 50, k = 5, rounds = 20000;
  std::vector<double> v(d);
  for (std::size_t i = 0; i < d; ++i) v[i] = 1.0 + static_cast<double>(i);
  std::vector<double> mean_unbiased(d, 0.0), mean_biased(d, 0.0);
  for (std::uint32_t r = 0; r < rounds; ++r) {
    message m;
    compress(random_k{k_spec::count(k), true}, std::span<const double>(v), m, {5, 0, r});
    const auto q = test::dense<double>(m);
    for (std::size_t i = 0; i < d; ++i) mean_unbiased[i] += q[i] / rounds;
    compress(random_k{k_spec::count(k), false}, std::span<const double>(v), m, {5, 0, r});
    const auto qb = test::dense<double>(m);
    for (std::size_t i = 0; i < d; ++i) mean_biased[i] += qb[i] / rounds;
  }
  // unbiased: q_i = (d/k) v_i w.p. k/d; sd of the mean = v_i sqrt((d/k - 1) / rounds) ~ 0.021 v_i
  for (std::size_t i = 0; i < d; ++i) {
    const double sd = v[i] * std::sqrt((double(d) / k - 1) / rounds);
    REQUIRE(std::abs(mean_unbiased[i] - v[i]) < 5 * sd);
    REQUIRE(std::abs(mean_biased[i] - v[i] * k / d) < 5 * sd * k / d);
  }
}

TEMPLATE_TEST_CASE("QSGD is unbiased and uses levels in [0, s]", "[compress]", float, double) {
  using T = TestType;
  const std::size_t d = 64, rounds = 20000;
  const auto v = test::gaussian<T>(d, 8);
  const double nrm = std::sqrt(test::norm2sq(v));
  for (std::uint16_t s : {1, 4, 16}) {
    std::vector<double> mean(d, 0.0);
    for (std::uint32_t r = 0; r < rounds; ++r) {
      message m;
      compress(qsgd{s}, std::span<const T>(v), m, {9, 3, r});
      REQUIRE(m.value_enc == value_encoding::qsgd);
      REQUIRE(m.wire_bytes() == message_header_bytes + (d * (1 + std::bit_width(unsigned(s))) + 7) / 8);
      for (std::size_t j = 0; j < d; ++j) {
        const double q = static_cast<double>(m.value_at<T>(j));
        // q is nrm * l / s for an integer level l next to |v| s / nrm
        const double level = std::abs(q) * s / nrm;
        REQUIRE(std::abs(level - std::round(level)) < 1e-3);
        REQUIRE(std::abs(level - std::abs(double(v[j])) * s / nrm) < 1.0 + 1e-3);
        mean[j] += q / rounds;
      }
    }
    // Var of one q_j <= (nrm/s)^2 / 4; 6 sd of the mean
    const double bound = 6 * (nrm / s) * 0.5 / std::sqrt(double(rounds)) + 1e-6 * nrm;
    for (std::size_t j = 0; j < d; ++j) REQUIRE(std::abs(mean[j] - double(v[j])) < bound);
  }
}

TEST_CASE("QSGD's streams are unbiased over many seeds, within the draw's resolution", "[compress][qsgd]") {
  // q_j = step * l_j (times sign), l_j = floor(r_j) + Bernoulli(p_j), r_j = |v_j| / step and
  // P(up) = ceil(frac(r_j) 2^b) / 2^b for b-bit draws, so E[q_j] - v_j is in [0, 2^-b step) and
  // Var(q_j) = step^2 p_j (1 - p_j). The mean over N seeds is within 6 sd of E[q_j] (a fixed-seed
  // test; a 6 sd excursion has probability 2e-9 per coordinate), plus the draw's bias, plus float
  // rounding of r_j (relative 2^-23 of r_j <= s, so below 1e-4 of a step here).
  const std::size_t d = 200, seeds = 4000;  // d: one 128-coordinate vector block and a tail
  const auto v = test::gaussian<float>(d, 31);
  const double nrm = static_cast<float>(std::sqrt(test::norm2sq(v)));
  for (const qsgd_stream stream : {qsgd_stream::philox7, qsgd_stream::philox10}) {
    for (const std::uint16_t s : {1, 2, 16, 256, 300}) {
      const bool half = stream == qsgd_stream::philox7 && s <= qsgd_half_draw_levels;
      const double step = nrm / s, draw_bias = std::ldexp(1.0, half ? -16 : -24);
      std::vector<double> mean(d, 0.0);
      for (std::uint64_t seed = 0; seed < seeds; ++seed) {
        message m;
        compress(qsgd{s, stream}, std::span<const float>(v), m, {seed * 7919 + 1, 2, 5});
        for (std::size_t j = 0; j < d; ++j) mean[j] += static_cast<double>(m.value_at<float>(j)) / seeds;
      }
      INFO("stream " << to_string(stream) << ", levels " << s);
      double worst = 0;
      for (std::size_t j = 0; j < d; ++j) {
        const double r = std::abs(double(v[j])) / step, p = r - std::floor(r);
        const double sd = step * std::sqrt(p * (1 - p) / seeds);
        const double err = std::abs(mean[j] - double(v[j]));
        REQUIRE(err <= 6 * sd + draw_bias * step + 1e-4 * step);
        worst = std::max(worst, err / step);
      }
      // and not vacuous: the mean does move away from a floor or nearest rounding
      REQUIRE(worst < 0.05);
    }
  }
}

TEST_CASE("scaled sign: q = (||v||_1 / d) sign(v), one bit a value", "[compress]") {
  const auto v = test::gaussian<double>(1001, 4);
  message m;
  compress(scaled_sign{}, std::span<const double>(v), m, {});
  double l1 = 0;
  for (double x : v) l1 += std::abs(x);
  const double scale = static_cast<double>(static_cast<float>(l1 / 1001));
  const auto q = test::dense<double>(m);
  for (std::size_t i = 0; i < v.size(); ++i) REQUIRE(q[i] == (v[i] < 0 ? -scale : scale));
  REQUIRE(m.wire_bytes() == message_header_bytes + (1001 + 7) / 8);
}

TEST_CASE("threshold: every kept magnitude >= every dropped one, count near k", "[compress]") {
  // (d, fraction): the first two sample (256 expected hits: spread ~6%), the last is small
  // enough that exact top-K is used (the sample would exceed d / 8).
  const std::vector<std::pair<std::size_t, double>> cases = {{200000, 0.1}, {2000000, 0.01}, {200000, 0.001}};
  for (const auto& [d, f] : cases) {
    for (unsigned seed = 0; seed < 4; ++seed) {
      const auto v = test::gaussian<float>(d, seed);
      message m;
      compress(threshold_k{k_spec::fraction(f)}, std::span<const float>(v), m, {seed, 0, 0});
      const auto k = f * static_cast<double>(d);
      INFO("d " << d << " f " << f << " count " << m.count);
      REQUIRE(m.count >= 0.5 * k);
      REQUIRE(m.count <= 2.0 * k);
      if (f == 0.001) REQUIRE(m.indices == test::reference_top_k(v, static_cast<std::size_t>(k)));
      std::vector<char> kept(d, 0);
      float min_kept = std::numeric_limits<float>::infinity();
      for (std::uint32_t j = 0; j < m.count; ++j) {
        kept[m.indices[j]] = 1;
        min_kept = std::min(min_kept, std::abs(v[m.indices[j]]));
        REQUIRE(m.value_at<float>(j) == v[m.indices[j]]);
      }
      float max_dropped = 0;
      for (std::size_t i = 0; i < d; ++i)
        if (!kept[i]) max_dropped = std::max(max_dropped, std::abs(v[i]));
      REQUIRE(min_kept >= max_dropped);
    }
  }
  // NaN on the sampling path is still reported with its index
  auto v = test::gaussian<float>(200000, 1);
  v[123457] = std::numeric_limits<float>::quiet_NaN();
  message m;
  try {
    compress(threshold_k{k_spec::fraction(0.1)}, std::span<const float>(v), m, {});
    FAIL("no exception");
  } catch (const non_finite_error& e) {
    REQUIRE(e.index() == 123457);
  }
}

TEST_CASE("threshold on a vector with few large values falls back to exact top-k", "[compress]") {
  std::vector<float> v(100000, 1.0f);  // all equal: the estimate keeps everything, then top-k
  message m;
  compress(threshold_k{k_spec::count(100)}, std::span<const float>(v), m, {});
  REQUIRE(m.count == 100);
  REQUIRE(m.indices == test::reference_top_k(v, 100));
}

namespace {
/// Round a finite float to the nearest value of a format with `mant` stored mantissa bits,
/// exponent range [emin, emax], ties to even, saturating: computed in long double arithmetic.
double reference_round(double x, int mant, int emin, int emax) {
  const double ax = std::abs(x);
  const double maxv = std::ldexp(2.0 - std::ldexp(1.0, -mant), emax);
  if (ax >= maxv) return std::copysign(maxv, x);
  int e = ax > 0 ? std::ilogb(ax) : emin;
  e = std::max(e, emin);
  const double ulp = std::ldexp(1.0, e - mant);
  const double q = ax / ulp;
  double r = std::floor(q);
  if (q - r > 0.5 || (q - r == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  return std::copysign(std::min(r * ulp, maxv), x);
}
}  // namespace

TEST_CASE("fp16 and bf16 encodings round to nearest even against a reference", "[compress]") {
  std::mt19937 g(3);
  std::vector<float> vals;
  for (int i = 0; i < 200000; ++i) {
    // random bit patterns of finite floats across all exponents
    float f;
    do {
      f = std::bit_cast<float>(static_cast<std::uint32_t>(g()));
    } while (!std::isfinite(f));
    vals.push_back(f);
  }
  for (float f : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e-8f, 5.96e-8f, 2.98e-8f, 6.1e-5f,
                  3.0e38f, -3.4e38f})
    vals.push_back(f);
  for (float f : vals) {
    const double h = detail::half_to_float(detail::float_to_half(f));
    REQUIRE(h == reference_round(f, 10, -14, 15));
    const double b = detail::bf16_to_float(detail::float_to_bf16(f));
    REQUIRE(b == reference_round(f, 7, -126, 127));
  }
}

TEST_CASE("int8 values: q = s * code with s = max|v| / 127, error below s / 2", "[compress]") {
  const auto v = test::gaussian<float>(5000, 6);
  message m;
  compress(top_k{k_spec::count(500), value_codec{value_encoding::i8, 0}}, std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == message_header_bytes + m.index_bytes() + 500);
  float amax = 0;
  for (auto i : m.indices) amax = std::max(amax, std::abs(v[i]));
  REQUIRE(m.scale == amax / 127.0f);
  for (std::uint32_t j = 0; j < m.count; ++j)
    REQUIRE(std::abs(m.value_at<float>(j) - v[m.indices[j]]) <= 0.5f * m.scale * 1.0001f);
}

// Found by tests/fuzz/fuzz_compress (inputs in tests/fuzz/crashes/compress): in float, 127 s
// overflowed for max|v| near FLT_MAX, nrm * l overflowed for ||v|| > FLT_MAX / levels, and
// levels / nrm overflowed for a subnormal norm (then 0 * inf = NaN was cast to an integer).
TEST_CASE("finite float inputs of extreme magnitude give finite q", "[compress]") {
  constexpr float big = std::numeric_limits<float>::max();
  constexpr float tiny = std::numeric_limits<float>::denorm_min();
  auto check = [](const auto& c, const std::vector<float>& v) {
    message m;
    compress(c, std::span<const float>(v), m, {5, 1, 2});
    const auto q = test::dense<float>(m);
    for (std::size_t i = 0; i < v.size(); ++i) {
      INFO("i = " << i << ", v = " << v[i] << ", q = " << q[i]);
      REQUIRE(std::isfinite(q[i]));
      REQUIRE(std::isfinite(v[i] - q[i]));  // the residual error feedback keeps
      REQUIRE(std::abs(q[i]) <= std::max(std::abs(v[i]) * 1.0001f, m.scale));
      REQUIRE((q[i] == 0 || (q[i] < 0) == (v[i] < 0)));
    }
    return m;
  };
  const value_codec int8{value_encoding::i8, 0};
  for (const float top : {big, std::nextafter(big, 0.0f), 0.9999f * big}) {
    const auto m = check(identity{int8}, {top, -top, 1.0f, 0.0f});
    REQUIRE(m.value_at<float>(0) >= 0.999f * top);  // saturates, does not collapse
  }
  for (const std::uint16_t levels : {std::uint16_t{1}, std::uint16_t{16}, max_qsgd_levels}) {
    check(qsgd{levels}, {1e36f, -3e35f, 0.0f, 7.0f});
    check(qsgd{levels}, {2e38f, 2e38f, -2e38f});  // ||v|| beyond FLT_MAX: the norm saturates
    check(qsgd{levels}, {tiny, 0.0f, -tiny});
    check(qsgd{levels}, {1e-40f, 0.0f, 3e-41f});
  }
}

TEST_CASE("compressor spec strings", "[compress]") {
  const auto v = test::gaussian<float>(10000, 2);
  auto check = [&](const char* spec, std::uint32_t count, value_encoding ve) {
    message m;
    compress(parse_compressor(spec), std::span<const float>(v), m, {});
    INFO(spec);
    REQUIRE(m.count == count);
    REQUIRE(m.value_enc == ve);
  };
  check("identity", 10000, value_encoding::f32);
  check("identity+fp16", 10000, value_encoding::f16);
  check("top-k:0.01", 100, value_encoding::f32);
  check("top-k:0.001+int8", 10, value_encoding::i8);
  check("top-k:250+bf16+u32", 250, value_encoding::bf16);
  check("random-k:0.01", 100, value_encoding::f32);
  check("random-k-unbiased:0.05+qsgd:8", 500, value_encoding::qsgd);
  check("qsgd:16", 10000, value_encoding::qsgd);
  check("sign", 10000, value_encoding::sign);
  check("top-k:0.01+sign", 100, value_encoding::sign);
  message m;
  compress(parse_compressor("top-k:0.01+u32"), std::span<const float>(v), m, {});
  REQUIRE(m.index_enc == index_encoding::raw_u32);
  compress(parse_compressor("top-k:0.01+varint"), std::span<const float>(v), m, {});
  REQUIRE(m.index_enc == index_encoding::delta_varint);

  REQUIRE_THROWS_WITH(parse_compressor("topk:0.01"), Catch::Contains("unknown compressor 'topk'"));
  REQUIRE_THROWS_WITH(parse_compressor("none"), Catch::Contains("unknown compressor 'none'"));  // identity's old alias
  REQUIRE_THROWS_WITH(parse_compressor("top-k"), Catch::Contains("missing k"));
  REQUIRE_THROWS_WITH(parse_compressor("top-k:1.5"), Catch::Contains("outside (0, 1]"));
  REQUIRE_THROWS_WITH(parse_compressor("top-k:abc"), Catch::Contains("'abc' is not a number"));
  // numbers whose conversion to an integer was undefined behaviour: clear errors instead
  for (const char* bad : {"top-k:nan", "top-k:inf", "random-k:-inf", "qsgd:nan", "qsgd:inf", "top-k:0.01+qsgd:nan",
                          "threshold:nan"})
    REQUIRE_THROWS_WITH(parse_compressor(bad), Catch::Contains("is not a finite number"));
  REQUIRE_THROWS_WITH(parse_compressor("top-k:99999999999999999999"), Catch::Contains("exceeds 4294967295"));
  REQUIRE_THROWS_WITH(parse_compressor("top-k:4294967296"), Catch::Contains("exceeds 4294967295"));
  REQUIRE(std::get<top_k>(parse_compressor("top-k:4294967295").get()).k.count_value() == 4294967295u);
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:2.5"), Catch::Contains("qsgd levels must be an integer"));
  REQUIRE_THROWS_WITH(parse_compressor("top-k:0"), Catch::Contains("k must be >= 1"));
  REQUIRE_THROWS_WITH(parse_compressor("top-k:0.01+int4"), Catch::Contains("unknown suffix '+int4'"));
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:0"), Catch::Contains("qsgd levels"));
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:70000"), Catch::Contains("qsgd levels"));
  REQUIRE_THROWS_WITH(parse_compressor("sign:3"), Catch::Contains("takes no argument"));
  REQUIRE_THROWS_WITH(parse_compressor("identity+u32"), Catch::Contains("dense"));
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:4+int8"), Catch::Contains("fixes its own value encoding"));
}

TEST_CASE("qsgd specs choose the random stream: philox7 by default, philox10 for 0.3.3's bits", "[compress][qsgd]") {
  auto stream_of = [](const char* spec) { return qsgd_stream_of(parse_compressor(spec)); };
  REQUIRE(stream_of("qsgd:16") == qsgd_stream::philox7);
  REQUIRE(stream_of("qsgd:16:philox7") == qsgd_stream::philox7);
  REQUIRE(stream_of("qsgd:16:philox10") == qsgd_stream::philox10);
  REQUIRE(std::get<qsgd>(parse_compressor("qsgd:300:philox10").get()).levels == 300);
  REQUIRE(stream_of("top-k:0.01+qsgd:4") == qsgd_stream::philox7);
  REQUIRE(stream_of("top-k:0.01+qsgd:4:philox10+u32") == qsgd_stream::philox10);
  REQUIRE(stream_of("identity+qsgd:8:philox10") == qsgd_stream::philox10);
  REQUIRE(std::get<random_k>(parse_compressor("random-k:10+qsgd:4:philox10").get()).values ==
          value_codec{value_encoding::qsgd, 4, qsgd_stream::philox10});
  REQUIRE_FALSE(stream_of("top-k:0.01+int8").has_value());
  REQUIRE_FALSE(stream_of("sign").has_value());
  // the two streams give different bits, and each is what the spec names
  const auto v = test::gaussian<float>(1000, 3);
  message a, b, c;
  compress(parse_compressor("qsgd:16"), std::span<const float>(v), a, {1, 2, 3});
  compress(qsgd{16, qsgd_stream::philox7}, std::span<const float>(v), b, {1, 2, 3});
  compress(parse_compressor("qsgd:16:philox10"), std::span<const float>(v), c, {1, 2, 3});
  REQUIRE(encode(a) == encode(b));
  REQUIRE(encode(a) != encode(c));
  // refusals name the spec and the choices
  const std::string choices = "(choices: philox7, the default, or philox10, the bits of 0.3.3)";
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:16:philox9"),
                      "sparsepush: compressor spec 'qsgd:16:philox9': unknown qsgd stream 'philox9' " + choices);
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:16:"),
                      "sparsepush: compressor spec 'qsgd:16:': missing qsgd stream after ':' " + choices);
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:16:philox10:x"),
                      "sparsepush: compressor spec 'qsgd:16:philox10:x': unknown qsgd stream 'philox10:x' " + choices);
  REQUIRE_THROWS_WITH(parse_compressor("top-k:0.1+qsgd:4:PHILOX7"),
                      "sparsepush: compressor spec 'top-k:0.1+qsgd:4:PHILOX7': unknown qsgd stream 'PHILOX7' " + choices);
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:philox7"), Catch::Contains("'philox7' is not a number"));
  REQUIRE_THROWS_WITH(parse_compressor("qsgd:0:philox7"), Catch::Contains("qsgd levels must be an integer"));
  REQUIRE_THROWS_WITH(parse_compressor("sign:philox7"), Catch::Contains("takes no argument"));
  REQUIRE_THROWS_WITH((value_codec{value_encoding::qsgd, 4, static_cast<qsgd_stream>(9)}.validate()),
                      Catch::Contains("unknown qsgd stream 9"));
}

TEST_CASE("settings_spec records the qsgd stream so that a checkpoint resumes only with the same bits",
          "[compress][qsgd]") {
  REQUIRE(settings_spec("qsgd:16") == "qsgd:16:philox7");
  REQUIRE(settings_spec("qsgd:16:philox7") == "qsgd:16:philox7");
  REQUIRE(settings_spec("qsgd:16:philox10") == "qsgd:16");  // the text 0.3.3 wrote for these bits
  REQUIRE(settings_spec("top-k:0.01+qsgd:4+u32") == "top-k:0.01+qsgd:4:philox7+u32");
  REQUIRE(settings_spec("top-k:0.01+qsgd:4:philox10+u32") == "top-k:0.01+qsgd:4+u32");
  for (const char* same : {"top-k:0.01+int8", "identity", "sign", "random-k:0.05+bf16+varint"})
    REQUIRE(settings_spec(same) == same);
  REQUIRE_THROWS_AS(settings_spec("qsgd:16:philox9"), config_error);
  // a 0.3.3 run's settings against this version's: refused under the new default, named
  run_settings old_run, new_default, pinned;
  old_run.add("compressor", "qsgd:16");
  new_default.add("compressor", settings_spec("qsgd:16"));
  pinned.add("compressor", settings_spec("qsgd:16:philox10"));
  REQUIRE(new_default.diff_from(old_run) == "compressor=qsgd:16 (now qsgd:16:philox7)");
  REQUIRE(pinned.diff_from(old_run).empty());
}

TEST_CASE("compressor spec errors name the real cause and where it is", "[compress]") {
  using namespace std::string_literals;
  // (spec, the whole message after "sparsepush: "): written out by hand, so the position is
  // counted here, not copied from the parser
  const std::pair<std::string, std::string> cases[] = {
      // a control byte used to read as "'0.01' is not a finite number" (it is a fine number)
      {"top-k:0.01\x01"s, "compressor spec 'top-k:0.01\\x01': unexpected byte 0x01 at position 10"},
      {"top-k:0\0"s, "compressor spec 'top-k:0\\x00': unexpected byte 0x00 at position 7"},
      {"\ttop-k:0.01"s, "compressor spec '\\x09top-k:0.01': unexpected byte 0x09 at position 0"},
      {"top-k: 0.01"s, "compressor spec 'top-k: 0.01': unexpected space at position 6"},
      {"top-k:0.01\xc3\xa9"s, "compressor spec 'top-k:0.01\\xc3\\xa9': unexpected byte 0xc3 at position 10"},
      {"top-k:abc"s, "compressor spec 'top-k:abc': 'abc' is not a number"},
      {"top-k:0.01x"s, "compressor spec 'top-k:0.01x': '0.01x' is not a number: unexpected 'x' at position 10"},
      {"top-k:1e999"s, "compressor spec 'top-k:1e999': '1e999' is out of range (not a finite number)"},
      {"top-k:nan"s, "compressor spec 'top-k:nan': 'nan' is not a finite number"},
      {"qsgd"s, "compressor spec 'qsgd': missing qsgd levels (an integer such as 16)"},
      {"top-k:0.01+qsgd"s, "compressor spec 'top-k:0.01+qsgd': missing qsgd levels (an integer such as 16)"},
      {""s, "compressor spec '' is empty (known: identity, top-k, random-k, random-k-unbiased, threshold, qsgd, sign)"},
      {"top-k:0.01+"s, "compressor spec 'top-k:0.01+': empty suffix after the '+' at position 10"},
      // these used to be accepted, the ":7" or the first encoding silently dropped
      {"top-k:0.01+int8:7"s, "compressor spec 'top-k:0.01+int8:7': suffix '+int8' takes no argument, got '+int8:7'"},
      {"top-k:0.01+int8+fp16"s, "compressor spec 'top-k:0.01+int8+fp16': a second value encoding '+fp16' at position 15"},
      {"top-k:0.01+u32+varint"s,
       "compressor spec 'top-k:0.01+u32+varint': a second index encoding '+varint' at position 14"},
  };
  for (const auto& [spec, expected] : cases) {
    INFO("spec of " << spec.size() << " bytes");
    std::string got;
    try {
      parse_compressor(spec);
    } catch (const config_error& e) {
      got = e.what();
    }
    REQUIRE(got == "sparsepush: " + expected);
  }
  // one of each encoding is still fine
  REQUIRE(std::get<top_k>(parse_compressor("top-k:0.01+int8+u32").get()).values.encoding == value_encoding::i8);
}

TEST_CASE("per-layer top-K keeps the fraction of every segment", "[compress]") {
  auto v = test::gaussian<double>(3000, 12);
  for (std::size_t i = 2000; i < 3000; ++i) v[i] *= 100;  // the last layer dominates global top-K
  const top_k c{k_spec::fraction(0.01), {value_encoding::i8, 0}, index_encoding::automatic, {0, 500, 2000}};
  message m;
  compress(c, std::span<const double>(v), m, {});
  // independent: top 1% of each segment, by the sort-based reference
  std::vector<std::uint32_t> want;
  for (auto [b, e] : {std::pair<std::size_t, std::size_t>{0, 500}, {500, 2000}, {2000, 3000}}) {
    const std::vector<double> seg(v.begin() + static_cast<std::ptrdiff_t>(b), v.begin() + static_cast<std::ptrdiff_t>(e));
    for (auto i : test::reference_top_k(seg, static_cast<std::size_t>(std::llround(0.01 * double(e - b)))))
      want.push_back(static_cast<std::uint32_t>(b + i));
  }
  REQUIRE(m.indices == want);
  REQUIRE(m.value_enc == value_encoding::i8);
  // fused feedback gives the same message and e = v - q
  std::vector<double> x = v, e(3000, 0.0);
  message q;
  compress_with_feedback(c, x, e, q, {});
  REQUIRE(encode(q) == encode(m));
  const auto qd = test::dense<double>(q);
  for (std::size_t i = 0; i < 3000; ++i) REQUIRE(e[i] == v[i] - qd[i]);
  // NaN anywhere: nothing written
  x[2500] = std::nan("");
  const auto e_before = e;
  REQUIRE_THROWS_AS(compress_with_feedback(c, x, e, q, {}), non_finite_error);
  REQUIRE(e == e_before);
  REQUIRE_THROWS_WITH((compress(top_k{k_spec::count(5), {}, index_encoding::automatic, {0, 10}}, std::span<const double>(v), m, {})),
                      Catch::Contains("needs k as a fraction"));
  REQUIRE_THROWS_WITH((compress(top_k{k_spec::fraction(0.1), {}, index_encoding::automatic, {0, 10, 5}}, std::span<const double>(v), m, {})),
                      Catch::Contains("not ascending"));
}

TEMPLATE_TEST_CASE("per-layer top-K with error feedback over segments large enough for the sampled selection",
                   "[compress]", float, double) {
  // Segments of 30000 at 3% take the sampled path, which leaves e to the caller's write pass
  // (small segments take the radix path, which writes e itself): e must end as v - q in every
  // segment either way. The reference is the plain compress of v = x + e and e = v - q by hand.
  using T = TestType;
  const std::size_t d = 95000;
  const top_k c{k_spec::fraction(0.03), {}, index_encoding::automatic, {0, 30000, 60000, 90000}};
  std::vector<T> e(d, T(0));
  for (std::uint32_t round = 0; round < 3; ++round) {
    const auto x = test::gaussian<T>(d, 40 + round);
    std::vector<T> v(d);
    for (std::size_t i = 0; i < d; ++i) v[i] = x[i] + e[i];
    message want, got;
    compress(c, std::span<const T>(v), want, {0, 0, round});
    const auto qd = test::dense<T>(want);
    std::vector<T> e_want(d);
    for (std::size_t i = 0; i < d; ++i) e_want[i] = v[i] - qd[i];
    compress_with_feedback(c, x, e, got, {0, 0, round});
    REQUIRE(encode(got) == encode(want));
    REQUIRE(std::memcmp(e.data(), e_want.data(), d * sizeof(T)) == 0);
    REQUIRE(want.count == 900 + 900 + 900 + 150);
  }
}

namespace {
/// Every built-in compressor, sparsifiers in several value and index encodings.
std::vector<any_compressor> workspace_compressors() {
  std::vector<any_compressor> out = {identity{}, qsgd{5}, scaled_sign{}};
  for (const value_codec codec : {value_codec{}, value_codec{value_encoding::i8, 0}, value_codec{value_encoding::qsgd, 6}})
    for (auto ie : {index_encoding::automatic, index_encoding::raw_u32}) {
      out.emplace_back(top_k{k_spec::fraction(0.02), codec, ie});
      out.emplace_back(top_k{k_spec::fraction(0.1), codec, ie, {0, 7, 300}});
      out.emplace_back(random_k{k_spec::fraction(0.03), true, codec, ie});
      out.emplace_back(random_k{k_spec::fraction(0.5), false, codec, ie});
      out.emplace_back(threshold_k{k_spec::fraction(0.05), 64, codec, ie});
    }
  return out;
}

bool same_bits(const message& a, const message& b) { return encode(a) == encode(b); }
}  // namespace

TEMPLATE_TEST_CASE("a reused workspace gives the messages of a fresh one", "[compress]", float, double) {
  using T = TestType;
  const auto all = workspace_compressors();
  compress_workspace<T> shared, other;
  // sizes on both sides of the top-K histogram and threshold sampling paths, in mixed order so
  // that every buffer is reused at a different size
  for (std::size_t d : {20000u, 500u, 120000u, 301u, 9000u}) {
    const auto v = test::gaussian<T>(d, static_cast<unsigned>(d));
    for (std::uint32_t round = 0; round < 2; ++round) {
      for (std::size_t c = 0; c < all.size(); ++c) {
        INFO("d " << d << " compressor " << c);
        const context ctx{7, 3, round};
        message fresh, reused, again, elsewhere, through;
        compress(all[c], std::span<const T>(v), fresh, ctx);
        all[c].compress(std::span<const T>(v), reused, ctx, shared);
        all[c].compress(std::span<const T>(v), again, ctx, shared);
        all[c].compress(std::span<const T>(v), elsewhere, ctx, other);
        std::visit([&](const auto& comp) { compress_with<T>(comp, std::span<const T>(v), through, ctx, shared); },
                   all[c].get());
        REQUIRE(same_bits(fresh, reused));
        REQUIRE(same_bits(fresh, again));
        REQUIRE(same_bits(fresh, elsewhere));
        REQUIRE(same_bits(fresh, through));
        REQUIRE(std::all_of(shared.taken.begin(), shared.taken.end(), [](std::uint64_t w) { return w == 0; }));
      }
    }
  }
}

TEST_CASE("workspace capacity grows with use and is reported in bytes", "[compress]") {
  compress_workspace<float> ws;
  REQUIRE(ws.capacity_bytes() == 0);
  const auto v = test::gaussian<float>(100000, 1);
  message m;
  top_k{k_spec::fraction(0.01)}.compress(std::span<const float>(v), m, {}, ws);
  // sampled path at d = 1e5, k = 1%: sample keys, a histogram, candidate buffers of 2k + 4096
  REQUIRE(ws.sel.capacity() >= 2 * 1000 + 4096);
  REQUIRE(ws.ckeys.capacity() >= 2 * 1000 + 4096);
  REQUIRE(ws.capacity_bytes() == ws.keys.capacity() * 4 + ws.sel.capacity() * 4 + ws.ckeys.capacity() * 4 +
                                     ws.hist.capacity() * 4);
  // histogram path at d = 1e5, k = 10%: 2 x 2^12 bins of u32 at least
  top_k{k_spec::fraction(0.1)}.compress(std::span<const float>(v), m, {}, ws);
  REQUIRE(ws.hist.capacity() >= 2 * (std::size_t{1} << detail::top_k_hist_bits_for(100000)));
  const std::size_t after_top_k = ws.capacity_bytes();
  REQUIRE(after_top_k == ws.keys.capacity() * 4 + ws.sel.capacity() * 4 + ws.ckeys.capacity() * 4 +
                             ws.hist.capacity() * 4 + ws.cand.capacity() * sizeof(ws.cand[0]) +
                             ws.chosen.capacity() * 4);
  random_k{k_spec::fraction(0.01)}.compress(std::span<const float>(v), m, {}, ws);
  REQUIRE(ws.taken.capacity() >= 100000 / 64);
  REQUIRE(ws.capacity_bytes() == after_top_k + ws.taken.capacity() * 8);
  // the generic error-feedback path keeps v = x + e in the workspace
  std::vector<float> e(100000, 0.0f);
  compress_with_feedback<float>(qsgd{4}, v, e, m, {}, ws);
  REQUIRE(ws.v.capacity() >= 100000);
  REQUIRE(ws.capacity_bytes() >= after_top_k + 100000 * sizeof(float));
  // reuse at the same size allocates nothing more (sign swaps its buffer with the message's
  // payload, so the cycle runs twice before both buffers have their final size)
  auto cycle = [&] {
    top_k{k_spec::fraction(0.01)}.compress(std::span<const float>(v), m, {}, ws);
    top_k{k_spec::fraction(0.1)}.compress(std::span<const float>(v), m, {}, ws);
    compress_with_feedback<float>(qsgd{4}, v, e, m, {}, ws);
    compress_with_feedback<float>(top_k{k_spec::fraction(0.01)}, v, e, m, {}, ws);
    scaled_sign{}.compress(std::span<const float>(v), m, {}, ws);
  };
  cycle();
  cycle();
  const std::size_t settled = ws.capacity_bytes();
  cycle();
  REQUIRE(ws.capacity_bytes() == settled);
}

TEST_CASE("random-K with one workspace across sizes: correct sets, bitmap left clear", "[compress]") {
  compress_workspace<double> ws;
  for (std::size_t d : {100000u, 64u, 1u, 5000u, 63u, 100001u, 129u}) {
    const auto v = test::gaussian<double>(d, static_cast<unsigned>(d));
    for (std::size_t k : {std::size_t{1}, d / 100 + 1, d / 3 + 1, d}) {
      k = std::min(k, d);
      const random_k c{k_spec::count(k)};
      message fresh, shared;
      compress(c, std::span<const double>(v), fresh, {4, 0, static_cast<std::uint32_t>(k)});
      c.compress(std::span<const double>(v), shared, {4, 0, static_cast<std::uint32_t>(k)}, ws);
      INFO("d " << d << " k " << k);
      REQUIRE(same_bits(fresh, shared));
      REQUIRE(shared.count == k);
      REQUIRE(std::adjacent_find(shared.indices.begin(), shared.indices.end(), std::greater_equal<>()) ==
              shared.indices.end());
      REQUIRE(shared.indices.back() < d);
      REQUIRE(std::all_of(ws.taken.begin(), ws.taken.end(), [](std::uint64_t w) { return w == 0; }));
    }
  }
}

namespace {
/// A user compressor with the three-argument compress only (the compressor_for concept).
struct keep_first {
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx) const {
    identity{}.compress(v.first(1), out, ctx);  // the first value, as a sparse message of v
    out.dim = static_cast<std::uint32_t>(v.size());
    out.index_enc = index_encoding::raw_u32;
    out.indices = {0};
  }
};
static_assert(compressor<keep_first>);
/// One with the workspace form only, as the built-ins that need scratch: every value, sent from
/// a copy in the caller's scratch.
struct copy_all {
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>& ws) const {
    ws.v.assign(v.begin(), v.end());
    identity{}.compress(std::span<const T>(ws.v), out, ctx);
  }
};
static_assert(compressor<copy_all>);
static_assert(compressor<identity> && compressor<qsgd> && compressor<top_k> && compressor<random_k> &&
              compressor<threshold_k> && compressor<scaled_sign> && compressor<any_compressor>);
static_assert(!compressor_for<copy_all, int> && !compressor<std::vector<float>>);
}  // namespace

TEST_CASE("compress_with and validate_compressor accept compressors without the new members",
          "[compress]") {
  const std::vector<float> v{3, 1, 2};
  compress_workspace<float> ws;
  message m;
  compress_with<float>(keep_first{}, v, m, {}, ws);
  REQUIRE(m.dim == 3);
  REQUIRE(m.count == 1);
  REQUIRE(ws.capacity_bytes() == 0);
  compress_with<float>(copy_all{}, v, m, {}, ws);  // the workspace form, with the caller's scratch
  REQUIRE(test::dense<float>(m) == v);
  REQUIRE(ws.capacity_bytes() > 0);
  compress(copy_all{}, v, m, {});  // the same with scratch of its own
  REQUIRE(test::dense<float>(m) == v);
  validate_compressor<float>(keep_first{}, 0, {});  // nothing to check
  std::vector<float> e(3, 0.0f);
  compress_with_feedback<float>(identity{}, v, e, m, {}, ws);
  REQUIRE(test::dense<float>(m) == v);
}

namespace {
/// What a call throws: the exception's dynamic type and message, or empty when it returns.
template <class F>
std::pair<std::string, std::string> thrown(F&& f) {
  try {
    f();
  } catch (const non_finite_error& e) {
    return {"non_finite_error", e.what()};
  } catch (const config_error& e) {
    return {"config_error", e.what()};
  } catch (const size_error& e) {
    return {"size_error", e.what()};
  } catch (const error& e) {
    return {"error", e.what()};
  }
  return {};
}
}  // namespace

TEMPLATE_TEST_CASE("validate throws exactly what compress throws for a bad configuration", "[compress]",
                   float, double) {
  using T = TestType;
  const context ctx{0, 4, 9};
  const auto bad_values = static_cast<value_encoding>(9);
  const auto bad_indices = static_cast<index_encoding>(7);
  struct error_case {
    any_compressor c;
    std::size_t d;
    const char* kind;
  };
  const std::vector<error_case> cases = {
      {top_k{k_spec::count(11)}, 10, "config_error"},
      {random_k{k_spec::count(11)}, 10, "config_error"},
      {threshold_k{k_spec::count(11)}, 10, "config_error"},
      {identity{}, 0, "size_error"},
      {top_k{}, 0, "size_error"},
      {random_k{}, 0, "size_error"},
      {threshold_k{}, 0, "size_error"},
      {qsgd{4}, 0, "size_error"},
      {scaled_sign{}, 0, "size_error"},
      {qsgd{0}, 10, "config_error"},
      {qsgd{40000}, 10, "config_error"},
      {identity{{value_encoding::qsgd, 0}}, 10, "config_error"},
      {top_k{k_spec::count(2), {value_encoding::qsgd, 0}}, 10, "config_error"},
      {random_k{k_spec::count(2), false, {value_encoding::qsgd, 40000}}, 10, "config_error"},
      {threshold_k{k_spec::count(2), 256, {value_encoding::qsgd, 0}}, 10, "config_error"},
      {threshold_k{k_spec::count(2), 0}, 10, "config_error"},
      {identity{{bad_values, 0}}, 10, "config_error"},
      {top_k{k_spec::count(2), {bad_values, 0}}, 10, "config_error"},
      {top_k{k_spec::count(2), {}, bad_indices}, 10, "config_error"},
      {random_k{k_spec::count(2), false, {}, bad_indices}, 10, "config_error"},
      {threshold_k{k_spec::count(2), 256, {}, bad_indices}, 10, "config_error"},
      {top_k{k_spec::count(5), {}, index_encoding::automatic, {0, 4}}, 10, "config_error"},      // k a count
      {top_k{k_spec::fraction(0.1), {}, index_encoding::automatic, {2, 4}}, 10, "config_error"},  // first not 0
      {top_k{k_spec::fraction(0.1), {}, index_encoding::automatic, {0, 6, 4}}, 10, "config_error"},  // not ascending
      {top_k{k_spec::fraction(0.1), {}, index_encoding::automatic, {0, 4, 10}}, 10, "config_error"},  // not below d
      {top_k{k_spec::fraction(0.1), {}, index_encoding::automatic, {0}}, 0, "size_error"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const any_compressor& c = cases[i].c;
    const std::size_t d = cases[i].d;
    const std::string kind = cases[i].kind;
    INFO("case " << i);
    const std::vector<T> v(d, T(1));
    message m, untouched;
    const auto from_validate = thrown([&] { c.validate(d, ctx); });
    const auto from_free = thrown([&] { validate_compressor<T>(c, d, ctx); });
    const auto from_compress = thrown([&] { compress(c, std::span<const T>(v), m, ctx); });
    compress_workspace<T> ws;
    const auto from_workspace = thrown([&] { c.compress(std::span<const T>(v), m, ctx, ws); });
    std::vector<T> e(d, T(0));
    const auto from_feedback = thrown([&] { compress_with_feedback<T>(c, v, e, m, ctx, ws); });
    REQUIRE(from_validate.first == kind);
    REQUIRE(from_validate == from_compress);
    REQUIRE(from_free == from_compress);
    REQUIRE(from_workspace == from_compress);
    REQUIRE(from_feedback == from_compress);
    REQUIRE(same_bits(m, untouched));
    // the variant's own alternative says the same
    std::visit([&](const auto& alt) { REQUIRE(thrown([&] { alt.validate(d, ctx); }) == from_compress); }, c.get());
  }
  // valid configurations pass at the size they are meant for
  for (const auto& c : workspace_compressors()) {
    REQUIRE_NOTHROW(c.validate(301, ctx));
    REQUIRE_NOTHROW(validate_compressor<T>(c, 301, ctx));
  }
  REQUIRE_NOTHROW(top_k{k_spec::count(10)}.validate(10, ctx));
  REQUIRE_NOTHROW(qsgd{max_qsgd_levels}.validate(1, ctx));
  REQUIRE_NOTHROW(identity{{value_encoding::qsgd, 1}}.validate(1, ctx));
}

TEST_CASE("validate rejects d >= 2^32 as compress does, before reading anything", "[compress]") {
  const std::size_t d = std::size_t{1} << 32;
  const context ctx{0, 1, 2};
  for (const auto& c : workspace_compressors()) {
    const auto from_validate = thrown([&] { c.validate(d, ctx); });
    REQUIRE(from_validate.first == "size_error");
    REQUIRE(from_validate.second.find("exceeds the 2^32-1 limit") != std::string::npos);
    REQUIRE(from_validate.second.find("node 1, round 2") != std::string::npos);
    REQUIRE_NOTHROW(c.validate(d - 1, ctx));
  }
#if defined(__linux__)
  // compress on a span of 2^32 floats over address space that may not be read: it must throw
  // the same error before touching the data (a read would crash the test)
  void* p = ::mmap(nullptr, d * sizeof(float), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) {
    const std::span<const float> huge(static_cast<const float*>(p), d);
    for (const auto& c : workspace_compressors()) {
      message m;
      REQUIRE(thrown([&] { compress(c, huge, m, ctx); }) == thrown([&] { c.validate(d, ctx); }));
    }
    ::munmap(p, d * sizeof(float));
  }
#endif
}
