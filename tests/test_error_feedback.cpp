// Tests of sparsepush/error_feedback.hpp: v = x + e; q = C(v); e = v - q, fused and generic,
// and the strong guarantee on bad input.
#include <catch2/catch.hpp>
#include <sparsepush/sparsepush.hpp>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
/// The generic path by hand: v = x + e; q = C(v); e = v - q, with C's plain compress.
template <class T, class C>
void reference_feedback(const C& c, const std::vector<T>& x, std::vector<T>& e, message& q,
                        const context& ctx) {
  std::vector<T> v(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) v[i] = x[i] + e[i];
  compress(c, std::span<const T>(v), q, ctx);
  const auto qd = test::dense<T>(q);
  for (std::size_t i = 0; i < x.size(); ++i) e[i] = v[i] - qd[i];
}
}  // namespace

TEMPLATE_TEST_CASE("x + e_old == q + e_new for every compressor, over many rounds", "[compress]",
                   float, double) {
  using T = TestType;
  const std::vector<any_compressor> all = {
      identity{},
      top_k{k_spec::fraction(0.01)},
      top_k{k_spec::fraction(0.1), {value_encoding::i8, 0}},
      top_k{k_spec::fraction(0.05), {value_encoding::f16, 0}},
      random_k{k_spec::fraction(0.02), true},
      threshold_k{k_spec::fraction(0.01)},
      qsgd{8},
      scaled_sign{},
      top_k{k_spec::fraction(0.02), {value_encoding::qsgd, 4}}};
  for (std::size_t d : {300u, 30000u}) {
    for (const auto& c : all) {
      std::vector<T> e(d, T(0));
      for (std::uint32_t round = 0; round < 8; ++round) {
        const auto x = test::gaussian<T>(d, 100 + round);
        const auto e_old = e;
        message q;
        compress_with_feedback(c, x, e, q, {3, 0, round});
        const auto qd = test::dense<T>(q);
        const bool exact = std::holds_alternative<top_k>(c.get()) && q.value_enc == detail::native_encoding<T>;
        for (std::size_t i = 0; i < d; ++i) {
          const T v = x[i] + e_old[i];
          if (exact) {  // native top-K: q is v or 0, so v - q is exact
            REQUIRE(qd[i] + e[i] == v);
          } else {  // one rounding in e = v - q
            const double tol = 4 * std::numeric_limits<T>::epsilon() * (std::abs(double(v)) + std::abs(double(qd[i])));
            REQUIRE(std::abs(double(qd[i]) + double(e[i]) - double(v)) <= tol);
          }
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("fused top-K feedback equals the generic path bit for bit", "[compress]", float, double) {
  using T = TestType;
  for (std::size_t d : {100u, 9000u, 100000u}) {
    for (const auto& codec : {value_codec{}, value_codec{value_encoding::bf16, 0}, value_codec{value_encoding::sign, 0}}) {
      const top_k c{k_spec::fraction(0.01), codec};
      std::vector<T> e1(d, T(0)), e2(d, T(0));
      for (std::uint32_t round = 0; round < 5; ++round) {
        const auto x = test::gaussian<T>(d, round);
        message q1, q2;
        compress_with_feedback(c, x, e1, q1, {1, 2, round});
        reference_feedback(c, x, e2, q2, {1, 2, round});
        REQUIRE(encode(q1) == encode(q2));
        REQUIRE(e1 == e2);
      }
    }
  }
}

TEST_CASE("error feedback residual accumulates what was not sent (top-1 of a constant)", "[compress]") {
  // x = 1 everywhere, top-1: every coordinate is eventually sent once its residual grows.
  const std::size_t d = 10;
  error_feedback<double> ef(d);
  std::vector<double> x(d, 1.0), sent(d, 0.0);
  for (std::uint32_t r = 0; r < 100; ++r) {
    message q;
    ef.step(top_k{k_spec::count(1)}, x, q, {0, 0, r});
    for_each_value<double>(q, [&](std::uint32_t i, double v) { sent[i] += v; });
  }
  // total mass is conserved: sent + residual == 100 * x
  for (std::size_t i = 0; i < d; ++i) REQUIRE(sent[i] + ef.residual()[i] == Approx(100.0).epsilon(1e-12));
  for (std::size_t i = 0; i < d; ++i) REQUIRE(sent[i] > 0);
  REQUIRE(ef.state_bytes() == d * sizeof(double));
}

TEMPLATE_TEST_CASE("bad input leaves the residual and the message untouched", "[compress]", float, double) {
  using T = TestType;
  const std::vector<any_compressor> all = {identity{}, top_k{k_spec::count(5)}, random_k{k_spec::count(5)},
                                           threshold_k{k_spec::count(5)}, qsgd{4}, scaled_sign{}};
  for (std::size_t d : {100u, 20000u}) {
    for (const auto& c : all) {
      std::vector<T> e = test::gaussian<T>(d, 1);
      auto x = test::gaussian<T>(d, 2);
      message q;
      compress_with_feedback(c, x, e, q, {0, 0, 0});
      const auto e_before = e;
      const auto q_before = encode(q);
      x[d / 2] = std::numeric_limits<T>::quiet_NaN();
      REQUIRE_THROWS_AS(compress_with_feedback(c, x, e, q, {0, 1, 1}), non_finite_error);
      REQUIRE(e == e_before);
      REQUIRE(encode(q) == q_before);
      // x + e overflowing to Inf is caught too
      x[d / 2] = std::numeric_limits<T>::max();
      e[d / 2] = std::numeric_limits<T>::max();
      const auto e_before2 = e;
      REQUIRE_THROWS_WITH(compress_with_feedback(c, x, e, q, {0, 1, 1}), Catch::Contains("Inf"));
      REQUIRE(e == e_before2);
      e = e_before;
      x = test::gaussian<T>(d, 2);
      // size mismatch and k > d
      std::vector<T> short_e(d - 1);
      REQUIRE_THROWS_WITH(compress_with_feedback(c, x, short_e, q, {0, 6, 2}),
                          Catch::Contains("residual e has " + std::to_string(d - 1)) &&
                              Catch::Contains("node 6, round 2"));
    }
    std::vector<T> e(d, T(1)), x(d, T(1));
    message q;
    REQUIRE_THROWS_AS(compress_with_feedback(top_k{k_spec::count(d + 1)}, x, e, q, {}), config_error);
    REQUIRE(e == std::vector<T>(d, T(1)));
  }
}

TEMPLATE_TEST_CASE("error feedback with a workspace equals the allocating call, and keeps the strong guarantee",
                   "[compress]", float, double) {
  using T = TestType;
  const std::vector<any_compressor> all = {identity{{value_encoding::bf16, 0}}, top_k{k_spec::fraction(0.01)},
                                           top_k{k_spec::fraction(0.05), {}, index_encoding::automatic, {0, 100}},
                                           random_k{k_spec::fraction(0.02), true}, threshold_k{k_spec::fraction(0.01)},
                                           qsgd{8}, scaled_sign{}};
  compress_workspace<T> ws;
  for (std::size_t d : {300u, 30000u}) {
    for (const auto& c : all) {
      std::vector<T> e1(d, T(0)), e2(d, T(0)), e3(d, T(0));
      for (std::uint32_t round = 0; round < 4; ++round) {
        const auto x = test::gaussian<T>(d, 100 + round);
        message q1, q2, q3;
        compress_with_feedback(c, x, e1, q1, {3, 0, round});      // its own scratch
        compress_with_feedback(c, x, e2, q2, {3, 0, round}, ws);  // tensors, shared scratch
        compress_with_feedback<T>(c, std::span<const T>(x), std::span<T>(e3), q3, {3, 0, round}, ws);
        REQUIRE(encode(q1) == encode(q2));
        REQUIRE(encode(q1) == encode(q3));
        REQUIRE(e1 == e2);
        REQUIRE(e1 == e3);
      }
      // a throw leaves e and q as they were
      auto x = test::gaussian<T>(d, 9);
      x[d / 3] = std::numeric_limits<T>::infinity();
      const auto e_before = e2;
      message q;
      compress_with_feedback(c, test::gaussian<T>(d, 8), e2, q, {3, 0, 9}, ws);
      const auto e_mid = e2;
      const auto q_before = encode(q);
      REQUIRE_THROWS_AS(compress_with_feedback(c, x, e2, q, {3, 0, 10}, ws), non_finite_error);
      REQUIRE(e2 == e_mid);
      REQUIRE(encode(q) == q_before);
      REQUIRE(std::all_of(ws.taken.begin(), ws.taken.end(), [](std::uint64_t w) { return w == 0; }));
    }
  }
  // the error_feedback accumulator with a workspace: same messages and residual as without
  const auto x = test::gaussian<T>(50, 1);
  error_feedback<T> c1(50), c2(50);
  for (std::uint32_t r = 0; r < 10; ++r) {
    message q1, q2;
    c1.step(qsgd{3}, x, q1, {0, 0, r});
    c2.step(qsgd{3}, x, q2, {0, 0, r}, ws);
    REQUIRE(encode(q1) == encode(q2));
  }
  REQUIRE(std::equal(c1.residual().begin(), c1.residual().end(), c2.residual().begin(), c2.residual().end()));
  REQUIRE(c2.state_bytes() == 50 * sizeof(T));  // the scratch is the caller's, counted there
}
