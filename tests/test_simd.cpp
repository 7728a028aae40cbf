// Tests of sparsepush/detail/simd.hpp and the kernels it dispatches (candidate_scan.hpp,
// value_kernels.hpp): the scalar path and every vector path this CPU has give the same bits, on
// the same inputs (ties, NaN/Inf, subnormals, zeros, d not a multiple of the vector width, small
// d, k = 1, k = d), and top-K equals a sort-based reference whichever path (sampled or radix) runs.
#include <catch2/catch.hpp>
#include <sparsepush/sparsepush.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace sparsepush;
using detail::simd_level;

namespace {

/// Restores the SIMD level in effect when it was made.
struct simd_guard {
  simd_level saved = detail::active_simd();
  ~simd_guard() { detail::set_simd_level(saved); }
};

/// The levels to compare with scalar: those this CPU has (on a CPU without AVX2, none).
std::vector<simd_level> vector_levels() {
  std::vector<simd_level> out;
  for (const simd_level l : {simd_level::avx2, simd_level::avx512})
    if (static_cast<int>(l) <= static_cast<int>(detail::simd_supported())) out.push_back(l);
  return out;
}

/// Scalar, then every vector level this CPU has.
std::vector<simd_level> all_levels() {
  std::vector<simd_level> out{simd_level::scalar};
  for (const simd_level l : vector_levels()) out.push_back(l);
  return out;
}

/// Inputs with the awkward cases: ties, zeros, subnormals, spikes, periodic structure.
template <class T>
std::vector<std::vector<T>> awkward_inputs(std::size_t d, unsigned seed) {
  std::vector<std::vector<T>> out;
  out.push_back(test::gaussian<T>(d, seed));
  auto ties = test::gaussian<T>(d, seed + 1);
  for (auto& x : ties) x = std::round(x * T(4)) / T(4);  // many equal magnitudes, +-0
  out.push_back(ties);
  auto sub = test::gaussian<T>(d, seed + 2);
  for (std::size_t i = 0; i < d; i += 3) sub[i] *= std::numeric_limits<T>::denorm_min() * T(1000);
  out.push_back(sub);
  std::vector<T> zeros(d, T(0));
  for (std::size_t i = 0; i < d; i += 97) zeros[i] = T(-1.5) * T(i % 5 + 1);
  out.push_back(zeros);
  auto spikes = test::gaussian<T>(d, seed + 3, 1e-3);
  for (std::size_t i = 0; i < std::min<std::size_t>(d, 40); ++i) spikes[i] = T(100 + i);  // all at the front
  out.push_back(spikes);
  std::vector<T> periodic(d);
  for (std::size_t i = 0; i < d; ++i) periodic[i] = (i / 1000) % 2 ? T(3) + T(i % 7) : T(0.001) * T(i % 11);
  out.push_back(periodic);
  return out;
}

template <class T>
std::vector<std::byte> top_k_bytes(const std::vector<T>& v, std::size_t k, compress_workspace<T>& ws) {
  message m;
  top_k{k_spec::count(k)}.compress(std::span<const T>(v), m, {1, 2, 3}, ws);
  return encode(m);
}

}  // namespace

TEST_CASE("set_simd_level lowers to what the CPU has and scalar is always available", "[compress]") {
  simd_guard g;
  REQUIRE(detail::set_simd_level(simd_level::scalar) == simd_level::scalar);
  REQUIRE(detail::active_simd() == simd_level::scalar);
  const simd_level best = detail::set_simd_level(simd_level::avx512);
  REQUIRE(best == detail::simd_supported());
  REQUIRE(detail::active_simd() == best);
}

TEST_CASE("vector Philox equals the scalar generator over many counters and keys", "[compress]") {
  simd_guard g;
  std::mt19937_64 gen(7);
  for (const simd_level l : vector_levels()) {
    detail::set_simd_level(l);
    for (int rep = 0; rep < 200; ++rep) {
      const std::uint64_t seed = gen();
      const auto node = static_cast<std::uint32_t>(gen()), round = static_cast<std::uint32_t>(gen());
      const auto stream = static_cast<detail::rng_stream>(1 + gen() % 5);
      const detail::counter_rng rng(seed, node, round, stream);
      // block numbers anywhere, including across the 2^32 wrap of the counter
      const auto b0 = rep % 3 == 0 ? static_cast<std::uint32_t>(0xFFFFFFFFu - gen() % 40) : static_cast<std::uint32_t>(gen());
      const std::size_t n = 1 + gen() % 70;
      std::vector<std::uint32_t> fast(4 * n), slow(4 * n);
      detail::philox_fill(rng, b0, n, fast.data());
      detail::philox_fill_scalar(rng, b0, n, slow.data());
      REQUIRE(fast == slow);
      for (std::size_t b = 0; b < n; ++b) {  // and the scalar fill is block() word for word
        const auto w = rng.block(static_cast<std::uint32_t>(b0 + b));
        for (int j = 0; j < 4; ++j) REQUIRE(slow[4 * b + j] == w[j]);
      }
    }
  }
}

TEMPLATE_TEST_CASE("top-K: scalar and vector paths give identical bits and match the sort reference",
                   "[compress]", float, double) {
  using T = TestType;
  simd_guard g;
  for (const std::size_t d : {1u, 2u, 15u, 17u, 63u, 65u, 1000u, 8193u, 40001u, 200003u}) {
    for (const auto& v : awkward_inputs<T>(d, static_cast<unsigned>(d))) {
      for (const std::size_t k : {std::size_t{1}, std::max<std::size_t>(1, d / 1000), std::max<std::size_t>(1, d / 100),
                                  std::max<std::size_t>(1, d / 33), d / 2 + 1, d}) {
        if (k == 0 || k > d) continue;
        compress_workspace<T> ws;
        detail::set_simd_level(simd_level::scalar);
        const auto scalar = top_k_bytes(v, k, ws);
        message m;
        decode(scalar, m);
        REQUIRE(m.indices == test::reference_top_k(v, k));
        for (const simd_level l : vector_levels()) {
          detail::set_simd_level(l);
          REQUIRE(top_k_bytes(v, k, ws) == scalar);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("fused top-K feedback: scalar and vector paths leave the same e and message",
                   "[compress]", float, double) {
  using T = TestType;
  simd_guard g;
  for (const std::size_t d : {100u, 9000u, 100001u}) {
    for (const std::size_t k : {std::size_t{1}, d / 1000 + 1, d / 100 + 1, d}) {
      std::vector<std::vector<T>> e_by_level;
      std::vector<std::vector<std::byte>> q_by_level;
      const std::vector<simd_level> levels = all_levels();
      for (const simd_level l : levels) {
        detail::set_simd_level(l);
        std::vector<T> e(d, T(0));
        compress_workspace<T> ws;
        message q;
        for (std::uint32_t round = 0; round < 4; ++round) {
          const auto x = test::gaussian<T>(d, 50 + round);
          compress_with_feedback<T>(top_k{k_spec::count(k)}, std::span<const T>(x), std::span<T>(e), q, {1, 0, round}, ws);
        }
        e_by_level.push_back(e);
        q_by_level.push_back(encode(q));
      }
      for (std::size_t i = 1; i < levels.size(); ++i) {
        REQUIRE(q_by_level[i] == q_by_level[0]);
        for (std::size_t j = 0; j < d; ++j)  // bit for bit, -0 and +0 apart
          REQUIRE(std::bit_cast<detail::magnitude_key<T>>(e_by_level[i][j]) ==
                  std::bit_cast<detail::magnitude_key<T>>(e_by_level[0][j]));
      }
    }
  }
}

TEMPLATE_TEST_CASE("NaN and Inf in x + e: the same error at every SIMD level, e untouched", "[compress]", float,
                   double) {
  using T = TestType;
  simd_guard g;
  const std::vector<simd_level> levels = all_levels();
  for (const std::size_t d : {70u, 20000u, 300001u}) {
    for (const std::size_t at : {std::size_t{0}, d / 2 + 3, d - 1}) {
      for (const T bad : {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                          std::numeric_limits<T>::max()}) {  // max: x + e overflows to Inf
        const auto x = test::gaussian<T>(d, 9);
        auto e0 = test::gaussian<T>(d, 10);
        e0[at] = bad;
        std::vector<T> xx = x;
        xx[at] = std::numeric_limits<T>::max();  // with e0[at] = max, x + e is +Inf
        std::vector<std::string> whats;
        for (const simd_level l : levels) {
          detail::set_simd_level(l);
          for (const auto& c : {any_compressor(top_k{k_spec::count(d / 200 + 1)}), any_compressor(scaled_sign{}),
                                any_compressor(qsgd{16})}) {
            auto e = e0;
            message q;
            q.dim = 12345;  // must survive the failed call
            try {
              compress_with_feedback(c, xx, e, q, {0, 4, 6});
              FAIL("no exception");
            } catch (const non_finite_error& err) {
              REQUIRE(err.index() == at);
              whats.push_back(err.what());
            }
            REQUIRE(q.dim == 12345);
            for (std::size_t j = 0; j < d; ++j)
              REQUIRE(std::bit_cast<detail::magnitude_key<T>>(e[j]) == std::bit_cast<detail::magnitude_key<T>>(e0[j]));
          }
          // and the plain compressors on v itself
          auto v = x;
          v[at] = std::isnan(bad) ? bad : std::numeric_limits<T>::infinity();
          for (const auto& c : {any_compressor(top_k{k_spec::count(3)}), any_compressor(scaled_sign{}),
                                any_compressor(qsgd{3})}) {
            message q;
            REQUIRE_THROWS_AS(compress(c, std::span<const T>(v), q, {0, 4, 6}), non_finite_error);
          }
        }
        for (std::size_t i = 0; i < whats.size(); ++i) REQUIRE(whats[i] == whats[i % 3]);  // per compressor
      }
    }
  }
}

TEMPLATE_TEST_CASE("sign and QSGD: scalar and vector paths give identical bits, dense equals the generic writer",
                   "[compress][qsgd]", float, double) {
  using T = TestType;
  simd_guard g;
  // d: below, at and past the vector blocks (64 codes; 128 with QSGD's 16-bit draws)
  for (const std::size_t d : {1u, 3u, 16u, 31u, 32u, 33u, 64u, 65u, 127u, 129u, 255u, 300u, 1000u, 4099u, 65537u}) {
    for (const auto& v : awkward_inputs<T>(d, static_cast<unsigned>(d) + 5)) {
      for (const std::uint16_t levels : {1, 2, 4, 16, 255, 256, 257, 8191, 32767})
      for (const qsgd_stream stream : {qsgd_stream::philox7, qsgd_stream::philox10}) {
        INFO("d " << d << " levels " << levels << " stream " << to_string(stream));
        const context ctx{11, 3, 9};
        auto run = [&] {
          std::vector<std::vector<std::byte>> out;
          message m;
          compress(qsgd{levels, stream}, std::span<const T>(v), m, ctx);
          out.push_back(encode(m));
          compress(scaled_sign{}, std::span<const T>(v), m, ctx);
          out.push_back(encode(m));
          return out;
        };
        detail::set_simd_level(simd_level::scalar);
        const auto scalar = run();
        // the dense kernels against the generic writers (value j at coordinate j): identity with
        // the same value encoding goes through write_qsgd / write_sign
        message m;
        compress(identity{{value_encoding::qsgd, levels, stream}}, std::span<const T>(v), m, ctx);
        REQUIRE(encode(m) == scalar[0]);
        compress(identity{{value_encoding::sign, 0}}, std::span<const T>(v), m, ctx);
        REQUIRE(encode(m) == scalar[1]);
        for (const simd_level l : vector_levels()) {
          detail::set_simd_level(l);
          REQUIRE(run() == scalar);
        }
      }
    }
  }
}

TEST_CASE("QSGD of a tiny-norm float vector: the vector path falls back to the scalar one", "[compress]") {
  simd_guard g;
  std::vector<float> v(300, 0.0f);
  for (std::size_t i = 0; i < v.size(); i += 7) v[i] = std::numeric_limits<float>::denorm_min() * float(i % 3 + 1);
  for (const std::uint16_t levels : {1, 16, 256, 300})
    for (const qsgd_stream stream : {qsgd_stream::philox7, qsgd_stream::philox10}) {
      detail::set_simd_level(simd_level::scalar);
      message m;
      compress(qsgd{levels, stream}, std::span<const float>(v), m, {});
      const auto scalar = encode(m);
      for (const simd_level l : vector_levels()) {
        detail::set_simd_level(l);
        compress(qsgd{levels, stream}, std::span<const float>(v), m, {});
        REQUIRE(encode(m) == scalar);
      }
    }
}

TEST_CASE("random-K: batched vector Philox draws the same set as one uniform_int per draw", "[compress]") {
  simd_guard g;
  const std::vector<simd_level> levels = all_levels();
  for (const std::size_t d : {1u, 5u, 64u, 65u, 1000u, 100003u}) {
    for (const std::size_t k : {std::size_t{1}, d / 64 + 1, d / 3 + 1, d}) {
      if (k > d) continue;
      const context ctx{0xABCDEF12345ull, 6, 17};
      // Floyd's algorithm written plainly, one draw at a time
      const detail::counter_rng rng(ctx.seed, ctx.node, ctx.round, detail::rng_stream::random_k);
      std::vector<bool> in(d, false);
      for (std::size_t j = d - k; j < d; ++j) {
        const auto jj = static_cast<std::uint32_t>(j);
        const std::uint32_t t = rng.uniform_int(jj, jj);
        if (in[t]) in[jj] = true;
        else in[t] = true;
      }
      std::vector<std::uint32_t> expect;
      for (std::size_t i = 0; i < d; ++i)
        if (in[i]) expect.push_back(static_cast<std::uint32_t>(i));
      const auto v = test::gaussian<float>(d, 3);
      for (const simd_level l : levels) {
        detail::set_simd_level(l);
        message m;
        compress(random_k{k_spec::count(k)}, std::span<const float>(v), m, ctx);
        REQUIRE(m.indices == expect);
      }
    }
  }
}

TEMPLATE_TEST_CASE("top-K: a scan whose candidates overflow the first buffer resumes in a larger one, exact at every level",
                   "[compress]", float, double) {
  // 1,000 values of 2, 12,000 of +-1 (ties) and small noise: the sample puts the threshold at 1, so
  // 13,000 candidates pass it where the first buffer holds 2k + 4096 = 8,096. The scan must resume
  // in a grown buffer (not fall back to the radix path) and still give the sort reference's
  // indices, and, with error feedback, e = v - q exactly.
  using T = TestType;
  simd_guard g;
  const std::size_t d = 200003, k = 2000;
  auto v = test::gaussian<T>(d, 71, 1e-3);
  std::mt19937_64 gen(72);
  std::vector<std::uint32_t> at(d);
  std::iota(at.begin(), at.end(), 0u);
  std::shuffle(at.begin(), at.end(), gen);
  for (std::size_t j = 0; j < 13000; ++j) v[at[j]] = j < 1000 ? T(2) : (j % 2 ? T(1) : T(-1));
  const auto want = test::reference_top_k(v, k);
  const std::vector<simd_level> levels = all_levels();
  for (const simd_level l : levels) {
    INFO("SIMD level " << static_cast<int>(l));
    detail::set_simd_level(l);
    compress_workspace<T> ws;
    message m;
    top_k{k_spec::count(k)}.compress(std::span<const T>(v), m, {1, 2, 3}, ws);
    REQUIRE(m.indices == want);
    REQUIRE(ws.ckeys.size() > detail::top_k_candidate_cap(k));  // it grew ...
    REQUIRE(ws.hist.size() < 2 * (std::size_t{1} << detail::top_k_hist_bits_for(d)));  // ... and radix did not run
    // error feedback: x = v - e0 with e0 small, so x + e0 rounds to v's neighbourhood; compare
    // with the plain v = x + e computed here
    auto x = v;
    std::vector<T> e(d);
    for (std::size_t i = 0; i < d; ++i) e[i] = T(1e-6) * T(i % 3);
    std::vector<T> sum(d);
    for (std::size_t i = 0; i < d; ++i) sum[i] = x[i] + e[i];
    compress_workspace<T> ws2;
    message q;
    compress_with_feedback<T>(top_k{k_spec::count(k)}, std::span<const T>(x), std::span<T>(e), q, {1, 2, 3}, ws2);
    REQUIRE(q.indices == test::reference_top_k(sum, k));
    std::vector<bool> kept(d, false);
    for (const auto i : q.indices) kept[i] = true;
    for (std::size_t i = 0; i < d; ++i) REQUIRE(e[i] == (kept[i] ? T(0) : sum[i]));
  }
}

namespace {
/// x - g p with the product rounded on its own whatever the compile flags (the node's plain step
/// in a build without FMA): the reference of the fused step's x.
template <class T>
T reference_step(T x, T g, T p) {
  volatile T prod = g * p;
  return x - prod;
}
}  // namespace

TEMPLATE_TEST_CASE("fused top-K step: plan then apply gives the bits of the local step then error feedback, at every level",
                   "[compress]", float, double) {
  using T = TestType;
  simd_guard g;
  const std::vector<simd_level> levels = all_levels();
  for (const std::size_t d : {1u, 17u, 1000u, 9001u, 100003u}) {
    const auto xs = awkward_inputs<T>(d, static_cast<unsigned>(d) + 5);
    for (std::size_t c = 0; c < xs.size(); ++c) {
      for (const std::size_t k : {std::size_t{1}, d / 100 + 1, d / 3 + 1}) {
        for (const T gamma : {T(0.1), T(-3.7), T(0)}) {
          const auto p = test::gaussian<T>(d, static_cast<unsigned>(c + 40), 2.0);
          auto e0 = test::gaussian<T>(d, static_cast<unsigned>(c + 60), 0.3);
          for (std::size_t i = 0; i < d; i += 5) e0[i] = T(0);
          // the unfused reference: x -= gamma p, then top-K with error feedback on the result
          auto x_ref = xs[c];
          for (std::size_t i = 0; i < d; ++i) x_ref[i] = reference_step(xs[c][i], gamma, p[i]);
          auto e_ref = e0;
          message q_ref;
          compress_workspace<T> ws_ref;
          detail::set_simd_level(simd_level::scalar);
          compress_with_feedback<T>(top_k{k_spec::count(k)}, std::span<const T>(x_ref), std::span<T>(e_ref), q_ref,
                                    {1, 2, 3}, ws_ref);
          for (const simd_level l : levels) {
            INFO("d " << d << ", input " << c << ", k " << k << ", gamma " << gamma << ", level " << static_cast<int>(l));
            detail::set_simd_level(l);
            auto x = xs[c];
            auto e = e0;
            std::vector<std::uint32_t> plan;
            compress_workspace<T> ws;
            const top_k tk{k_spec::count(k)};
            tk.plan_step(std::span<const T>(x), std::span<const T>(p), gamma, std::span<const T>(e), plan, {1, 2, 3}, ws);
            REQUIRE(std::memcmp(x.data(), xs[c].data(), d * sizeof(T)) == 0);  // the plan writes nothing
            REQUIRE(std::memcmp(e.data(), e0.data(), d * sizeof(T)) == 0);
            message q;
            tk.apply_step(std::span<T>(x), std::span<const T>(p), gamma, std::span<T>(e), plan, q, {1, 2, 3});
            REQUIRE(encode(q) == encode(q_ref));
            REQUIRE(std::memcmp(x.data(), x_ref.data(), d * sizeof(T)) == 0);  // bit for bit, -0 included
            REQUIRE(std::memcmp(e.data(), e_ref.data(), d * sizeof(T)) == 0);
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("fused top-K feedback and step take the kept values in the write pass: chunk edges, every codec, every level",
                   "[compress]", float, double) {
  // The write pass runs in chunks of 65536 from the end and takes each chunk's kept values while
  // it is in cache. Kept indices sit on every chunk edge; the reference is the generic path by hand
  // (v = x + e dense, top-K of v, e = v - q), so a value taken from the wrong chunk, a kept index
  // skipped or a residual left unsubtracted shows. k = 2000 of d = 196615 takes the sampled path.
  using T = TestType;
  simd_guard g;
  const std::size_t d = 3 * 65536 + 7, k = 2000;
  const std::vector<std::size_t> edges = {0, 65535, 65536, 131071, 131072, 196607, 196608, d - 1};
  auto x0 = test::gaussian<T>(d, 71, 0.01);
  for (std::size_t j = 0; j < edges.size(); ++j) x0[edges[j]] = T(100) + T(j) * T(j % 2 ? -1 : 1);
  const auto p = test::gaussian<T>(d, 72, 2.0);
  auto e0 = test::gaussian<T>(d, 73, 0.03);
  e0[7] = T(-0.0);
  const T gamma = T(0.01);
  for (const auto& codec : {value_codec{}, value_codec{value_encoding::bf16, 0}, value_codec{value_encoding::i8, 0}}) {
    const top_k c{k_spec::count(k), codec};
    for (const bool step : {false, true}) {
      // the reference: the local step with its product rounded alone, then v = x + e, q = C(v), e = v - q
      auto x_ref = x0;
      if (step)
        for (std::size_t i = 0; i < d; ++i) x_ref[i] = reference_step(x0[i], gamma, p[i]);
      std::vector<T> v(d), e_ref(d);
      for (std::size_t i = 0; i < d; ++i) v[i] = x_ref[i] + e0[i];
      message q_ref;
      compress(c, std::span<const T>(v), q_ref, {2, 1, 4});
      for (const std::size_t i : edges) REQUIRE(std::find(q_ref.indices.begin(), q_ref.indices.end(), i) != q_ref.indices.end());
      const auto qd = test::dense<T>(q_ref);
      for (std::size_t i = 0; i < d; ++i) e_ref[i] = v[i] - qd[i];
      for (const simd_level l : all_levels()) {
        INFO("codec " << static_cast<int>(codec.encoding) << ", step " << step << ", level " << static_cast<int>(l));
        detail::set_simd_level(l);
        auto x = x0;
        auto e = e0;
        message q;
        compress_workspace<T> ws;
        if (step) {
          std::vector<std::uint32_t> plan;
          c.plan_step(std::span<const T>(x), std::span<const T>(p), gamma, std::span<const T>(e), plan, {2, 1, 4}, ws);
          c.apply_step(std::span<T>(x), std::span<const T>(p), gamma, std::span<T>(e), plan, q, {2, 1, 4});
        } else {
          compress_with_feedback<T>(c, std::span<const T>(x), std::span<T>(e), q, {2, 1, 4}, ws);
        }
        REQUIRE(encode(q) == encode(q_ref));
        REQUIRE(std::memcmp(x.data(), x_ref.data(), d * sizeof(T)) == 0);
        REQUIRE(std::memcmp(e.data(), e_ref.data(), d * sizeof(T)) == 0);  // bit for bit, -0 included
      }
    }
  }
}

TEMPLATE_TEST_CASE("fused top-K step: a bad direction or an overflowing step is named at every level, nothing written",
                   "[compress]", float, double) {
  using T = TestType;
  simd_guard g;
  const std::vector<simd_level> levels = all_levels();
  const T big = std::numeric_limits<T>::max() / T(2);
  for (const std::size_t d : {50u, 100003u}) {
    const std::size_t at = d - 3;
    struct bad {
      const char* name;
      T x, p, e, gamma;
      const char* says;
    };
    const bad cases[] = {
        {"NaN direction", T(1), std::numeric_limits<T>::quiet_NaN(), T(0), T(0.1), "local direction"},
        {"Inf direction, gamma 0", T(1), std::numeric_limits<T>::infinity(), T(0), T(0), "local direction"},
        {"step overflows", big, -big, T(0), T(3), "x + e"},
        {"residual overflows", big, T(0), big * T(1.5), T(1), "x + e"},
        {"NaN in x", std::numeric_limits<T>::quiet_NaN(), T(1), T(0), T(0.1), "x + e"},
    };
    for (const auto& b : cases) {
      for (const simd_level l : levels) {
        INFO(b.name << ", d " << d << ", level " << static_cast<int>(l));
        detail::set_simd_level(l);
        auto x = test::gaussian<T>(d, 3);
        auto p = test::gaussian<T>(d, 4);
        auto e = test::gaussian<T>(d, 5, 0.1);
        x[at] = b.x;
        p[at] = b.p;
        e[at] = b.e;
        const auto x0 = x, e0 = e;
        std::vector<std::uint32_t> plan;
        compress_workspace<T> ws;
        REQUIRE_THROWS_WITH(top_k{k_spec::fraction(0.01)}.plan_step(std::span<const T>(x), std::span<const T>(p), b.gamma,
                                                                    std::span<const T>(e), plan, {1, 2, 3}, ws),
                            Catch::Contains(b.says) && Catch::Contains("index " + std::to_string(at)));
        REQUIRE(std::memcmp(x.data(), x0.data(), d * sizeof(T)) == 0);
        REQUIRE(std::memcmp(e.data(), e0.data(), d * sizeof(T)) == 0);
      }
    }
  }
}

TEST_CASE("fused top-K step: apply refuses a plan that is not plan_step's, before writing", "[compress]") {
  const std::size_t d = 100;
  auto x = test::gaussian<float>(d, 1);
  const auto p = test::gaussian<float>(d, 2);
  std::vector<float> e(d, 0.0f);
  const auto x0 = x;
  message q;
  const top_k tk{k_spec::count(3)};
  const std::vector<std::vector<std::uint32_t>> plans{{1, 2}, {3, 2, 5}, {1, 2, 100}, {4, 4, 9}};
  for (const auto& plan : plans) {
    REQUIRE_THROWS_WITH(tk.apply_step(std::span<float>(x), std::span<const float>(p), 0.1f, std::span<float>(e), plan, q,
                                      {1, 2, 3}),
                        Catch::Contains("plan"));
    REQUIRE(x == x0);
  }
  top_k per_layer{k_spec::fraction(0.1)};
  per_layer.segments = {0, 50};
  REQUIRE_FALSE(per_layer.fuses_step());
  REQUIRE(tk.fuses_step());
  std::vector<std::uint32_t> plan;
  compress_workspace<float> ws;
  REQUIRE_THROWS_WITH(per_layer.plan_step(std::span<const float>(x), std::span<const float>(p), 0.1f,
                                          std::span<const float>(e), plan, {1, 2, 3}, ws),
                      Catch::Contains("per-layer"));
  REQUIRE_THROWS_AS(tk.plan_step(std::span<const float>(x), std::span<const float>(p).first(d - 1), 0.1f,
                                 std::span<const float>(e), plan, {1, 2, 3}, ws),
                    size_error);
}
