// Tests of simulated B-bit training (nn/quantize.hpp) and what comes with it: the nearest and
// stochastic range quantizers against their error bounds and unbiasedness, the quantized
// loss_and_grad's determinism by (seed, node, round), Range-EvoNorm against a naive forward and
// finite differences, and the energy estimate of the device profile.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sparsepush/nn/model.hpp>
#include <sparsepush/nn/quantize.hpp>
#include <string>
#include <vector>

using namespace sparsepush;

namespace {

std::vector<double> randn(std::size_t n, std::uint64_t seed, double sd = 1.0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0.0, sd);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

detail::counter_rng grad_rng(std::uint64_t seed, std::uint32_t node, std::uint32_t round) {
  return detail::counter_rng(seed, node, round, detail::rng_stream::gradient_quantization);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

}  // namespace

TEST_CASE("quantize: nearest error <= range / (2 (2^B - 1)), values on the grid", "[nn][quantize]") {
  for (unsigned bits : {4u, 8u, 12u, 16u}) {
    INFO("bits " << bits);
    const auto x = randn(1000, bits);
    auto q = x;
    nn::quantize_nearest(std::span<double>(q), bits);
    const double lo = *std::min_element(x.begin(), x.end()), hi = *std::max_element(x.begin(), x.end());
    const double step = (hi - lo) / double((1u << bits) - 1);
    std::vector<double> grid;
    for (std::size_t i = 0; i < x.size(); ++i) {
      CHECK(std::abs(q[i] - x[i]) <= step / 2 * (1 + 1e-9));
      const double k = (q[i] - lo) / step;  // an integer level in [0, 2^B - 1]
      CHECK(std::abs(k - std::round(k)) < 1e-6);
      CHECK(k > -1e-6);
      CHECK(k < double((1u << bits) - 1) + 1e-6);
    }
    // the extremes are exact, and quantizing again changes nothing (values on the grid stay)
    CHECK(*std::min_element(q.begin(), q.end()) == Approx(lo).epsilon(1e-15));
    CHECK(*std::max_element(q.begin(), q.end()) == Approx(hi).epsilon(1e-15));
    auto qq = q;
    nn::quantize_nearest(std::span<double>(qq), bits);
    for (std::size_t i = 0; i < q.size(); ++i) CHECK(qq[i] == Approx(q[i]).margin(step * 1e-9));
  }
  // at 8 bits the error is visibly nonzero (the quantizer does something)
  const auto x = randn(100, 5);
  auto q = x;
  nn::quantize_nearest(std::span<double>(q), 8);
  CHECK(q != x);
}

TEST_CASE("quantize: integer levels in [0, 2^B - 1] are exact", "[nn][quantize]") {
  std::vector<float> x(256);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float((i * 37) % 256);  // 0 .. 255, permuted
  auto a = x, b = x;
  nn::quantize_nearest(std::span<float>(a), 8);
  nn::quantize_stochastic(std::span<float>(b), 8, grad_rng(1, 2, 3));
  CHECK(a == x);
  CHECK(b == x);
}

TEST_CASE("quantize: constant and zero-range tensors are unchanged, NaN and bad bits throw", "[nn][quantize]") {
  std::vector<float> c(17, 2.5f), z(9, 0.0f), one{-3.0f};
  for (auto* v : {&c, &z, &one}) {
    auto a = *v, b = *v;
    nn::quantize_nearest(std::span<float>(a), 4);
    nn::quantize_stochastic(std::span<float>(b), 4, grad_rng(0, 0, 0));
    CHECK(a == *v);
    CHECK(b == *v);
  }
  std::vector<float> nan{1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  CHECK_THROWS_AS(nn::quantize_nearest(std::span<float>(nan), 8), non_finite_error);
  CHECK_THROWS_WITH(nn::quantize_stochastic(std::span<float>(nan), 8, grad_rng(0, 0, 0)),
                    Catch::Contains("non-finite value at index 1"));
  std::vector<float> inf{std::numeric_limits<float>::infinity()};
  CHECK_THROWS_AS(nn::quantize_nearest(std::span<float>(inf), 8), non_finite_error);
  std::vector<float> x{1, 2, 3};
  CHECK_THROWS_WITH(nn::quantize_nearest(std::span<float>(x), 3), Catch::Contains("bits 3"));
  CHECK_THROWS_WITH(nn::quantize_nearest(std::span<float>(x), 17), Catch::Contains("bits 17"));
  CHECK_THROWS_AS(nn::quantize_stochastic(std::span<float>(x), 2, grad_rng(0, 0, 0)), config_error);
}

TEST_CASE("quantize: stochastic rounding is unbiased and its error is below one step", "[nn][quantize]") {
  for (unsigned bits : {4u, 8u}) {
    INFO("bits " << bits);
    const std::size_t n = 64, draws = 4000;
    const auto x = randn(n, 11 + bits);
    const double lo = *std::min_element(x.begin(), x.end()), hi = *std::max_element(x.begin(), x.end());
    const double step = (hi - lo) / double((1u << bits) - 1);
    std::vector<double> mean(n, 0.0);
    double max_err = 0;
    for (std::uint32_t r = 0; r < draws; ++r) {
      auto q = x;
      nn::quantize_stochastic(std::span<double>(q), bits, grad_rng(7, 3, r));
      for (std::size_t i = 0; i < n; ++i) {
        max_err = std::max(max_err, std::abs(q[i] - x[i]));
        mean[i] += q[i] / double(draws);
      }
    }
    CHECK(max_err < step);
    // each draw is x's lower or upper grid neighbour: variance <= step^2 / 4, so the mean of
    // `draws` lies within 5 standard errors = 5 step / (2 sqrt(draws)) of x
    for (std::size_t i = 0; i < n; ++i) CHECK(std::abs(mean[i] - x[i]) <= 5 * step / (2 * std::sqrt(double(draws))));
    // and it is not simply nearest rounding: the mean is much closer than half a step somewhere
    auto nearest = x;
    nn::quantize_nearest(std::span<double>(nearest), bits);
    double worst_nearest = 0, worst_mean = 0;
    for (std::size_t i = 0; i < n; ++i) {
      worst_nearest = std::max(worst_nearest, std::abs(nearest[i] - x[i]));
      worst_mean = std::max(worst_mean, std::abs(mean[i] - x[i]));
    }
    CHECK(worst_mean < worst_nearest / 3);
  }
}

TEST_CASE("quantize: a tensor past its lane of 2^24 elements draws words no other lane uses", "[nn][quantize]") {
  // Lane 0 holds 2^24 + 64 elements, lane 1 (first_block 2^22) 64. Both have the range [0, 1] and,
  // past it, values at 7.5 grid steps (4 bits: step 1/15), which round down or up by the random
  // word alone. Lane 0's last 64 elements and lane 1's elements sit at the same block offsets
  // past 2^22: drawing the same words would make their 62 decisions identical.
  const std::size_t lane = std::size_t{4} << 22, tail = 64;
  const float mid = 7.5f / 15.0f;
  std::vector<float> big(lane + tail, mid), small(tail, mid);
  big[0] = small[0] = 0.0f;
  big[1] = small[1] = 1.0f;
  nn::quantize_stochastic(std::span<float>(big), 4, grad_rng(5, 1, 9));
  nn::quantize_stochastic(std::span<float>(small), 4, grad_rng(5, 1, 9), "test", nn::quantization_lane_blocks);
  int same = 0, up_big = 0, up_small = 0;
  for (std::size_t j = 2; j < tail; ++j) {
    const bool a = big[lane + j] > mid, b = small[j] > mid;
    REQUIRE(std::abs(big[lane + j] - mid) <= 0.5f / 15.0f + 1e-6f);  // one of the two neighbours
    same += a == b;
    up_big += a;
    up_small += b;
  }
  // independent fair coins: 62 agreements has probability 2^-62; each side's ups look like coins
  CHECK(same < 62);
  CHECK(up_big > 10);
  CHECK(up_big < 52);
  CHECK(up_small > 10);
  CHECK(up_small < 52);
  // the first 2^24 elements are unchanged from one lane's blocks: a prefix rounds the same bits
  std::vector<float> prefix(big.begin(), big.begin() + 4096), again(4096, mid);
  again[0] = 0.0f;
  again[1] = 1.0f;
  nn::quantize_stochastic(std::span<float>(again), 4, grad_rng(5, 1, 9));
  CHECK(again == prefix);
}

TEST_CASE("quantize: the quantized loss_and_grad is deterministic by (seed, node, round)", "[nn][quantize]") {
  for (const std::string name : {"cnn", "cnn_range_evonorm", "mlp"}) {
    INFO(name);
    const auto m = nn::model::make(name, 1, 8, 8, 4);
    std::vector<float> p(m.num_params());
    m.init(std::span<float>(p), 3);
    const auto xd = randn(4 * m.input_size(), 4);
    const std::vector<float> x(xd.begin(), xd.end());
    const std::vector<std::uint8_t> y{0, 1, 2, 3};
    nn::workspace ws, ws2;
    std::vector<float> g0(p.size()), g1(p.size()), g2(p.size()), g3(p.size()), gf(p.size()), goff(p.size());
    const float l0 = m.loss_and_grad(p, x.data(), y.data(), 4, g0, ws, nn::quantization{8, 5, 1, 9});
    const float l1 = m.loss_and_grad(p, x.data(), y.data(), 4, g1, ws2, nn::quantization{8, 5, 1, 9});
    m.loss_and_grad(p, x.data(), y.data(), 4, g2, ws, nn::quantization{8, 5, 1, 10});
    m.loss_and_grad(p, x.data(), y.data(), 4, g3, ws, nn::quantization{8, 5, 2, 9});
    const float lf = m.loss_and_grad(p, x.data(), y.data(), 4, gf, ws);
    const float loff = m.loss_and_grad(p, x.data(), y.data(), 4, goff, ws, nn::quantization{0, 5, 1, 9});
    CHECK(l0 == l1);
    CHECK(g0 == g1);
    CHECK(g0 != g2);  // another round rounds differently
    CHECK(g0 != g3);  // another node too
    CHECK(goff == gf);  // bits 0 is exactly the unquantized overload
    CHECK(loff == lf);
    CHECK(g0 != gf);
    // 8-bit gradients stay close to full precision: cosine similarity near 1
    double dotp = 0, na = 0, nb = 0;
    for (std::size_t i = 0; i < p.size(); ++i) {
      dotp += double(g0[i]) * gf[i];
      na += double(g0[i]) * g0[i];
      nb += double(gf[i]) * gf[i];
    }
    CHECK(dotp / std::sqrt(na * nb) > 0.95);
    CHECK(std::abs(l0 - lf) < 0.05 * std::abs(lf));
    CHECK_THROWS_WITH(m.loss_and_grad(p, x.data(), y.data(), 4, g0, ws, nn::quantization{3, 0, 0, 0}),
                      Catch::Contains("bits 3"));
    CHECK_THROWS_WITH(m.loss_and_grad(p, x.data(), y.data(), 4, g0, ws, nn::quantization{17, 0, 0, 0}),
                      Catch::Contains("bits 17"));
  }
}

TEST_CASE("range_evo_norm: forward matches a naive computation, gradients match finite differences",
          "[nn][quantize]") {
  const nn::range_evo_norm en({4, 2, 3}, 2);
  const std::size_t batch = 2, n = 12;
  REQUIRE(en.chunks == 6);  // the largest divisor of 12 up to 16 that leaves 2 elements a chunk
  const auto x = randn(batch * 24, 51);
  const auto p = randn(12, 52);
  std::vector<double> y(x.size());
  nn::layer_scratch<double> s;
  en.forward(p.data(), x.data(), y.data(), batch, s);
  // Banner et al.'s constant for chunks of 2: 0.175 (1 + sqrt(pi ln 4)) / sqrt(2 ln 2)
  const double cn = 0.175 * (1 + std::sqrt(3.14159265358979323846 * std::log(4.0))) / std::sqrt(2 * std::log(2.0));
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t g = 0; g < 2; ++g) {
      const double* xg = x.data() + (b * 2 + g) * n;
      double range = 0;  // mean over the 6 chunks of (max - min), each chunk sorted
      for (std::size_t k = 0; k < 6; ++k) {
        std::vector<double> sorted(xg + 2 * k, xg + 2 * k + 2);
        std::sort(sorted.begin(), sorted.end());
        range += (sorted.back() - sorted.front()) / 6;
      }
      const double sd = cn * range + 1e-5;
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t c = g * 2 + i / 6;
        const double expect = p[c] * xg[i] / (1 + std::exp(-p[8 + c] * xg[i])) / sd + p[4 + c];
        CHECK(y[(b * 2 + g) * n + i] == Approx(expect).epsilon(1e-12));
      }
    }
  // the chunk counts: 16 for the cnn's groups (3136 and 1568 elements), the largest divisor of
  // the group size up to 16 otherwise, 1 for a group of 2 or a prime size
  CHECK(nn::range_evo_norm({16, 28, 28}, 4).chunks == 16);
  CHECK(nn::range_evo_norm({32, 14, 14}, 4).chunks == 16);
  CHECK(nn::range_evo_norm({5, 2, 3}, 1).chunks == 15);
  CHECK(nn::range_evo_norm({1, 1, 2}, 1).chunks == 1);
  CHECK(nn::range_evo_norm({1, 1, 17}, 1).chunks == 1);
  CHECK(nn::range_evo_norm({4, 2, 3}, 2, 1e-5, 4).chunks == 4);
  // s_g estimates the group's standard deviation on Gaussian data: with gamma 1, beta 0 and v 0,
  // y = x / (2 s_g). Chunks of 196 normal draws have an expected range of about 5.49 sigma, so
  // s_g is about 0.166 * 5.49 = 0.91 sigma
  {
    const nn::range_evo_norm big({4, 28, 28}, 1);
    REQUIRE(big.chunks == 16);
    const auto xb = randn(big.in_shape().size(), 61, 3.0);
    std::vector<double> pb(big.num_params(), 0.0), yb(xb.size());
    std::fill(pb.begin(), pb.begin() + 4, 1.0);
    big.forward(pb.data(), xb.data(), yb.data(), 1, s);
    double mean = 0, var = 0;
    for (double v : xb) mean += v / double(xb.size());
    for (double v : xb) var += (v - mean) * (v - mean) / double(xb.size());
    const double sg = xb[7] / (2 * yb[7]);
    CHECK(sg > 0.8 * std::sqrt(var));
    CHECK(sg < 1.05 * std::sqrt(var));
  }
  // finite differences of L = sum w y in double; random inputs have distinct values, so the
  // argmax and argmin do not switch within h
  for (auto [layer, nb, seed] : {std::tuple{en, std::size_t{2}, 53}, std::tuple{nn::range_evo_norm({8, 3, 3}, 4), std::size_t{3}, 54},
                                 std::tuple{nn::range_evo_norm({8, 4, 4}, 2), std::size_t{2}, 55}}) {  // 16 chunks of 4
    INFO(layer.describe());
    auto xi = randn(nb * layer.in_shape().size(), seed);
    auto pi = randn(layer.num_params(), seed + 1, 0.5);
    const auto w = randn(xi.size(), seed + 2);
    std::vector<double> yi(xi.size()), dx(xi.size()), dp(pi.size());
    auto loss = [&] {
      layer.forward(pi.data(), xi.data(), yi.data(), nb, s);
      return dot(w, yi);
    };
    loss();
    layer.backward(pi.data(), xi.data(), yi.data(), w.data(), dx.data(), dp.data(), nb, s);
    auto fd = [&](std::vector<double>& v, const std::vector<double>& analytic) {
      double err = 0, norm = 0;
      for (std::size_t i = 0; i < v.size(); ++i) {
        const double keep = v[i], h = 1e-6;
        v[i] = keep + h;
        const double up = loss();
        v[i] = keep - h;
        const double down = loss();
        v[i] = keep;
        const double num = (up - down) / (2 * h);
        err += (num - analytic[i]) * (num - analytic[i]);
        norm += num * num;
      }
      return std::sqrt(err / norm);
    };
    CHECK(fd(xi, dx) < 1e-6);
    CHECK(fd(pi, dp) < 1e-6);
  }
  CHECK_THROWS_AS(nn::range_evo_norm({3, 2, 2}, 2), config_error);  // channels not divisible by groups
  CHECK_THROWS_AS(nn::range_evo_norm({4, 2, 3}, 2, 1e-5, 0), config_error);  // no chunks
}

TEST_CASE("device profile: reductions and compute energy from Horowitz's 45 nm figures", "[nn][quantize]") {
  const auto m = nn::model::make("cnn");
  const auto fp = m.profile(32), q8 = m.profile(32, 8), q16 = m.profile(32, 16), q4 = m.profile(32, 4);
  CHECK(fp.bits == 32);
  CHECK(fp.compute_energy_reduction == 1);
  CHECK(fp.compute_energy_joules == Approx(fp.flops / 2 * 4.6e-12).epsilon(1e-12));
  CHECK(q8.flops == fp.flops);
  CHECK(q8.memory_reduction == 4);
  CHECK(q8.compute_reduction == 4);
  CHECK(q8.communication_reduction == 4);
  CHECK(q8.compute_energy_joules == Approx(fp.flops / 2 * 0.23e-12).epsilon(1e-12));
  CHECK(q8.compute_energy_reduction == Approx(4.6 / 0.23).epsilon(1e-12));  // the paper's ~20x
  CHECK(q16.compute_energy_reduction == Approx(4.6 / 1.5).epsilon(1e-12));
  CHECK(q4.compute_energy_reduction > q8.compute_energy_reduction);
  CHECK(m.profile(32, 0).bits == 32);
  CHECK_THROWS_WITH(m.profile(32, 3), Catch::Contains("bits 3"));
  CHECK(nn::communication_energy_joules(1000) == Approx(8000 * 485 * 0.86e-9).epsilon(1e-12));
}
