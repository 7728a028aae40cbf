// Tests of the training backend (nn/*.hpp): every layer's input and parameter gradients against
// central finite differences in double, forward passes against naive references, the models'
// gradients, a tiny learning task, deterministic init, the device profile, sgd and lr schedules.
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <sparsepush/nn/gemm.hpp>
#include <sparsepush/nn/model.hpp>
#include <sparsepush/nn/optimizer.hpp>
#include <string>
#include <thread>
#include <variant>
#include <vector>

using namespace sparsepush;

namespace {

std::vector<double> randn(std::size_t n, std::uint64_t seed, double sd = 1.0) {
  nn::normal_rng r(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = sd * r.normal();
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

/// ||a - b|| / max(||a||, ||b||, 1e-12)
double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0, na = 0, nb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (a[i] - b[i]) * (a[i] - b[i]);
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return std::sqrt(d) / std::max({std::sqrt(na), std::sqrt(nb), 1e-12});
}

/// Central differences of f at every coordinate of v (v is restored).
template <class F>
std::vector<double> numeric_grad(std::vector<double>& v, F f, double h = 1e-6) {
  std::vector<double> g(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double up = f();
    v[i] = keep - h;
    const double down = f();
    v[i] = keep;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

/// Checks a layer's backward against finite differences of L = sum_j w_j y_j(x, p), in double.
/// Inputs are N(0, 1) pushed at least `margin` away from 0 (for ReLU's kink).
template <class L>
void check_layer(const L& l, std::size_t batch, std::uint64_t seed, double margin = 0.0) {
  const std::size_t nin = batch * l.in_shape().size(), nout = batch * l.out_shape().size(), np = l.num_params();
  auto x = randn(nin, seed);
  for (auto& v : x)
    if (std::abs(v) < margin) v = v < 0 ? v - margin : v + margin;
  auto p = randn(np, seed + 1, 0.5);
  const auto w = randn(nout, seed + 2);
  nn::layer_scratch<double> s;
  std::vector<double> y(nout);
  auto loss = [&] {
    l.forward(p.data(), x.data(), y.data(), batch, s);
    return dot(w, y);
  };
  loss();
  std::vector<double> dx(nin, std::numeric_limits<double>::quiet_NaN());
  std::vector<double> dp(np, std::numeric_limits<double>::quiet_NaN());
  l.backward(p.data(), x.data(), y.data(), w.data(), dx.data(), dp.data(), batch, s);
  const auto ndx = numeric_grad(x, loss);
  INFO(l.describe());
  CHECK(rel_err(dx, ndx) < 1e-6);
  if (np) {
    const auto ndp = numeric_grad(p, loss);
    CHECK(rel_err(dp, ndp) < 1e-6);
    // the parameter gradient does not depend on whether dx is asked for
    loss();
    std::vector<double> dp2(np, std::numeric_limits<double>::quiet_NaN());
    l.backward(p.data(), x.data(), y.data(), w.data(), static_cast<double*>(nullptr), dp2.data(), batch, s);
    CHECK(dp2 == dp);
  }
}

/// Naive direct convolution, zero padding.
std::vector<double> naive_conv(const nn::conv2d& c, const std::vector<double>& p, const std::vector<double>& x,
                               std::size_t batch) {
  const auto in = c.in, out = c.out;
  std::vector<double> y(batch * out.size());
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t o = 0; o < out.c; ++o)
      for (std::size_t oh = 0; oh < out.h; ++oh)
        for (std::size_t ow = 0; ow < out.w; ++ow) {
          double acc = p[out.c * c.fan_in() + o];
          for (std::size_t ci = 0; ci < in.c; ++ci)
            for (std::size_t i = 0; i < c.k; ++i)
              for (std::size_t j = 0; j < c.k; ++j) {
                const long ih = long(oh * c.stride + i) - long(c.pad), iw = long(ow * c.stride + j) - long(c.pad);
                if (ih < 0 || iw < 0 || ih >= long(in.h) || iw >= long(in.w)) continue;
                acc += p[((o * in.c + ci) * c.k + i) * c.k + j] *
                       x[((b * in.c + ci) * in.h + std::size_t(ih)) * in.w + std::size_t(iw)];
              }
          y[((b * out.c + o) * out.h + oh) * out.w + ow] = acc;
        }
  return y;
}

template <class T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace

TEST_CASE("gemm: every tile shape, init and instruction set matches a naive product", "[nn]") {
  using namespace nn::detail;
  std::mt19937_64 gen(17);
  const std::vector<simd_level> levels{simd_level::baseline, simd_level::avx2, simd_level::avx512};
  INFO("this CPU runs " << simd_name(simd_supported()));
  for (int trial = 0; trial < 200; ++trial) {
    // n past two column blocks of the widest tile (AVX-512: 6 vectors, 96 floats): every width of
    // the last block, full and partial
    const std::size_t m = 1 + gen() % 40, n = 1 + gen() % 210, k = gen() % 50;
    const bool a_transposed = gen() % 2, padded = gen() % 2;
    const auto init = gemm_init(gen() % 4);
    const std::size_t ldb = padded ? gemm_pad<float>(n) + 16 * (gen() % 2) : n + gen() % 3;
    const std::size_t ldc = n + gen() % 3;
    const auto a = cast<float>(randn(m * k, 100 + trial));
    // B exactly as long as its rows need (a padded B holds whole vectors): reads past it would be caught by ASan
    const auto b = cast<float>(randn(k ? (k - 1) * ldb + (padded ? gemm_pad<float>(n) : n) : 0, 200 + trial));
    const auto bias = cast<float>(randn(std::max(m, gemm_pad<float>(n)), 300 + trial));
    const auto c0 = cast<float>(randn(m * ldc, 400 + trial));
    gemm_args<float> g;
    g.a = a.data(), g.a_row = a_transposed ? 1 : k, g.a_col = a_transposed ? m : 1;
    g.b = b.data(), g.ldb = ldb, g.b_padded = padded;
    g.ldc = ldc, g.m = m, g.n = n, g.k = k, g.init = init, g.bias = bias.data();
    std::vector<std::vector<float>> out;
    for (const auto level : levels) {
      std::vector<float> c = c0;
      g.c = c.data();
      gemm(g, level);
      out.push_back(c);
    }
    {  // the baseline as compiled for any CPU (std::fma a library call where the target lacks FMA)
      std::vector<float> c = c0;
      g.c = c.data();
      gemm_baseline(g);
      out.push_back(c);
    }
    INFO("m " << m << ", n " << n << ", k " << k << ", init " << int(init) << ", padded " << padded);
    double worst = 0;
    bool untouched = true;
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < ldc; ++j) {
        const std::size_t at = i * ldc + j;
        if (j >= n) {  // past column n: never written
          for (const auto& c : out) untouched = untouched && c[at] == c0[at];
          continue;
        }
        double ref = init == gemm_init::zero         ? 0.0
                     : init == gemm_init::accumulate ? c0[at]
                     : init == gemm_init::row_bias   ? bias[i]
                                                     : bias[j];
        double scale = std::abs(ref);
        for (std::size_t q = 0; q < k; ++q) {
          const double t = double(a[i * g.a_row + q * g.a_col]) * double(b[q * ldb + j]);
          ref += t;
          scale += std::abs(t);
        }
        for (const auto& c : out) worst = std::max(worst, std::abs(c[at] - ref) / (scale + 1e-30));
      }
    CHECK(worst < 1e-6);
    CHECK(untouched);
    // every level rounds alike: the multiply-adds are explicit FMAs, whatever the compile mode
    CHECK(out[0] == out[2]);
    CHECK(out[1] == out[2]);
    CHECK(out[3] == out[2]);
  }
}

TEST_CASE("transpose: every shape and instruction set moves each element to its mirror place", "[nn]") {
  using namespace nn::detail;
  std::mt19937_64 gen(23);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t rows = 1 + gen() % 50, cols = 1 + gen() % 70;
    const std::size_t lds = cols + gen() % 4, ldd = rows + gen() % 4;
    const auto src = cast<float>(randn(rows * lds, 500 + trial));
    for (const auto level : {simd_level::baseline, simd_level::avx2, simd_level::avx512}) {
      std::vector<float> dst(cols * ldd, -7.f);
      transpose(src.data(), lds, rows, cols, dst.data(), ldd, level);
      bool ok = true;
      for (std::size_t j = 0; j < cols; ++j)
        for (std::size_t i = 0; i < ldd; ++i)  // past row `rows`: never written
          ok = ok && dst[j * ldd + i] == (i < rows ? src[i * lds + j] : -7.f);
      INFO(rows << " x " << cols << ", lds " << lds << ", ldd " << ldd << ", " << simd_name(level));
      CHECK(ok);
    }
  }
}

TEST_CASE("copy_rows: every length and instruction set copies the rows and nothing else", "[nn]") {
  using namespace nn::detail;
  std::mt19937_64 gen(29);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t rows = 1 + gen() % 20, len = gen() % 70;
    const std::size_t lds = len + gen() % 4, ldd = len + gen() % 4;
    const auto src = cast<float>(randn(rows * lds, 600 + trial));
    for (const auto level : {simd_level::baseline, simd_level::avx2, simd_level::avx512}) {
      std::vector<float> dst(rows * ldd, -7.f);
      copy_rows(src.data(), lds, dst.data(), ldd, rows, len, level);
      bool ok = true;
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t t = 0; t < ldd; ++t) ok = ok && dst[r * ldd + t] == (t < len ? src[r * lds + t] : -7.f);
      INFO(rows << " rows of " << len << ", lds " << lds << ", ldd " << ldd << ", " << simd_name(level));
      CHECK(ok);
    }
  }
}

TEST_CASE("dense and conv2d: a sample's output does not depend on the batch around it", "[nn]") {
  const nn::dense d({3, 8, 8}, 10);
  const nn::conv2d c({3, 9, 9}, 5, 3, 1, 1);
  const auto pd = cast<float>(randn(d.num_params(), 21)), pc = cast<float>(randn(c.num_params(), 22));
  const std::size_t batch = 13;
  const auto x = cast<float>(randn(batch * 192, 23)), xc = cast<float>(randn(batch * 243, 24));
  nn::layer_scratch<float> s;
  std::vector<float> yd(batch * 10), yc(batch * c.out_shape().size());
  d.forward(pd.data(), x.data(), yd.data(), batch, s);
  c.forward(pc.data(), xc.data(), yc.data(), batch, s);
  for (std::size_t b = 0; b < batch; ++b) {
    std::vector<float> one(10), onec(c.out_shape().size());
    d.forward(pd.data(), x.data() + b * 192, one.data(), 1, s);
    c.forward(pc.data(), xc.data() + b * 243, onec.data(), 1, s);
    CHECK(std::equal(one.begin(), one.end(), yd.begin() + std::ptrdiff_t(b * 10)));
    CHECK(std::equal(onec.begin(), onec.end(), yc.begin() + std::ptrdiff_t(b * onec.size())));
  }
}

TEST_CASE("dense: gradients match finite differences", "[nn]") {
  check_layer(nn::dense({2, 3, 2}, 5), 3, 1);
  check_layer(nn::dense({7, 1, 1}, 1), 1, 2);
}

TEST_CASE("conv2d: forward equals a direct convolution, gradients match finite differences", "[nn]") {
  struct cfg {
    nn::shape3 in;
    std::size_t oc, k, s, p;
  };
  for (const auto& c : {cfg{{3, 6, 5}, 4, 3, 1, 1}, cfg{{3, 7, 7}, 4, 3, 2, 1}, cfg{{2, 8, 6}, 3, 3, 2, 1},
                        cfg{{2, 6, 6}, 3, 2, 2, 0}, cfg{{3, 5, 4}, 2, 1, 1, 0}, cfg{{1, 9, 8}, 2, 5, 2, 2},
                        cfg{{2, 5, 5}, 3, 3, 1, 0}}) {
    const nn::conv2d conv(c.in, c.oc, c.k, c.s, c.p);
    INFO(conv.describe());
    const std::size_t batch = 2;
    const auto x = randn(batch * c.in.size(), 5);
    const auto p = randn(conv.num_params(), 6);
    std::vector<double> y(batch * conv.out_shape().size());
    nn::layer_scratch<double> s;
    conv.forward(p.data(), x.data(), y.data(), batch, s);
    CHECK(rel_err(y, naive_conv(conv, p, x, batch)) < 1e-14);
    check_layer(conv, batch, 7);
  }
  CHECK(nn::conv2d({1, 28, 28}, 16, 3, 1, 1).out_shape() == nn::shape3{16, 28, 28});
  CHECK(nn::conv2d({1, 7, 7}, 4, 3, 2, 1).out_shape() == nn::shape3{4, 4, 4});
}

TEST_CASE("conv2d: forward and backward at stride 1 are the bits of naive multiply-add chains", "[nn]") {
  // The products' contract, written out: y = bias, then fma over (c, i, j) with the padding's
  // zeros; dW = 0, then fma over (sample, output position); db summed in that order; dx = 0, then
  // fma over (o, i, j) of the flipped kernel and the zero-padded dY. Whatever packs the operands
  // (im2col, padded copies, shifted windows, transposes) must land on exactly these bits.
  struct cfg {
    nn::shape3 in;
    std::size_t out_c, k, pad, batch;
  };
  for (const auto& [in, out_c, k, pad, batch] :
       {cfg{{1, 28, 28}, 16, 3, 1, 3}, cfg{{16, 14, 14}, 32, 3, 1, 2}, cfg{{3, 7, 9}, 4, 3, 1, 3},
        cfg{{2, 6, 5}, 3, 3, 0, 2}, cfg{{5, 9, 8}, 2, 5, 2, 2}, cfg{{3, 10, 10}, 40, 3, 1, 2}}) {
    const nn::conv2d cv(in, out_c, k, 1, pad);
    const auto p = cast<float>(randn(cv.num_params(), 700 + out_c));
    const auto x = cast<float>(randn(batch * in.size(), 800 + out_c));
    const auto dy = cast<float>(randn(batch * cv.out.size(), 900 + out_c));
    nn::layer_scratch<float> s;
    std::vector<float> y(dy.size()), dx(x.size()), dp(p.size());
    cv.forward(p.data(), x.data(), y.data(), batch, s);
    cv.backward(p.data(), x.data(), y.data(), dy.data(), dx.data(), dp.data(), batch, s);
    const std::size_t R = cv.fan_in(), oh = cv.out.h, ow = cv.out.w;
    const auto X = [&](std::size_t n, std::size_t c, std::size_t hp, std::size_t wp) {  // padded coordinates
      const bool inside = hp >= pad && wp >= pad && hp - pad < in.h && wp - pad < in.w;
      return inside ? x[((n * in.c + c) * in.h + hp - pad) * in.w + wp - pad] : 0.f;
    };
    const std::size_t q = k - 1 - pad;  // dY's padding in the full convolution
    const auto DY = [&](std::size_t n, std::size_t o, std::size_t hp, std::size_t wp) {
      const bool inside = hp >= q && wp >= q && hp - q < oh && wp - q < ow;
      return inside ? dy[((n * out_c + o) * oh + hp - q) * ow + wp - q] : 0.f;
    };
    std::vector<float> ry(y.size()), rdx(dx.size()), rdp(dp.size());
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t o = 0; o < out_c; ++o)
        for (std::size_t h = 0; h < oh; ++h)
          for (std::size_t w = 0; w < ow; ++w) {
            float a = p[out_c * R + o];
            for (std::size_t c = 0; c < in.c; ++c)
              for (std::size_t i = 0; i < k; ++i)
                for (std::size_t j = 0; j < k; ++j) a = std::fma(p[o * R + (c * k + i) * k + j], X(n, c, h + i, w + j), a);
            ry[((n * out_c + o) * oh + h) * ow + w] = a;
          }
    for (std::size_t o = 0; o < out_c; ++o) {
      float db = 0;
      for (std::size_t n = 0; n < batch; ++n)
        for (std::size_t at = 0; at < oh * ow; ++at) db += dy[(n * out_c + o) * oh * ow + at];
      rdp[out_c * R + o] = db;
      for (std::size_t r = 0; r < R; ++r) {
        const std::size_t c = r / (k * k), i = r / k % k, j = r % k;
        float a = 0;
        for (std::size_t n = 0; n < batch; ++n)
          for (std::size_t h = 0; h < oh; ++h)
            for (std::size_t w = 0; w < ow; ++w) a = std::fma(X(n, c, h + i, w + j), dy[((n * out_c + o) * oh + h) * ow + w], a);
        rdp[o * R + r] = a;
      }
    }
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t c = 0; c < in.c; ++c)
        for (std::size_t h = 0; h < in.h; ++h)
          for (std::size_t w = 0; w < in.w; ++w) {
            float a = 0;
            for (std::size_t o = 0; o < out_c; ++o)
              for (std::size_t i = 0; i < k; ++i)
                for (std::size_t j = 0; j < k; ++j)
                  a = std::fma(p[o * R + (c * k + k - 1 - i) * k + k - 1 - j], DY(n, o, h + i, w + j), a);
            rdx[((n * in.c + c) * in.h + h) * in.w + w] = a;
          }
    INFO(in.str() << " -> " << out_c << ", k " << k << ", pad " << pad << ", batch " << batch);
    CHECK(y == ry);
    CHECK(dp == rdp);
    CHECK(dx == rdx);
  }
}

TEST_CASE("pooling: forward on a hand example, gradients match finite differences", "[nn]") {
  const nn::max_pool2d mp({1, 4, 4}, 2, 2);
  const nn::avg_pool2d ap({1, 4, 4}, 2, 2);
  const std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  nn::layer_scratch<double> s;
  std::vector<double> y(4);
  mp.forward<double>(nullptr, x.data(), y.data(), 1, s);
  CHECK(y == std::vector<double>{6, 8, 14, 16});
  ap.forward<double>(nullptr, x.data(), y.data(), 1, s);
  CHECK(y == std::vector<double>{3.5, 5.5, 11.5, 13.5});
  const nn::global_avg_pool gp({2, 2, 2});
  std::vector<double> g(2);
  gp.forward<double>(nullptr, x.data(), g.data(), 1, s);
  CHECK(g == std::vector<double>{2.5, 6.5});

  check_layer(nn::max_pool2d({3, 6, 6}, 2, 2), 2, 11);
  check_layer(nn::max_pool2d({2, 7, 5}, 3, 2), 2, 12);  // overlapping windows, floor
  check_layer(nn::avg_pool2d({3, 6, 6}, 2, 2), 2, 13);
  check_layer(nn::avg_pool2d({2, 7, 7}, 3, 2), 2, 14);
  check_layer(nn::global_avg_pool({4, 3, 5}), 3, 15);
}

TEST_CASE("relu and flatten: gradients match finite differences", "[nn]") {
  check_layer(nn::relu({3, 4, 4}), 2, 21, 1e-3);
  check_layer(nn::flatten({3, 4, 4}), 2, 22);
  CHECK(nn::flatten({3, 4, 5}).out_shape() == nn::shape3{60, 1, 1});
}

TEST_CASE("group_norm: normalises each group, gradients match finite differences", "[nn]") {
  const nn::group_norm gn({4, 3, 3}, 2);
  const std::size_t batch = 2;
  const auto x = randn(batch * 36, 31, 3.0);
  std::vector<double> p(8);
  nn::normal_rng rng0(0);
  gn.init(p.data(), rng0);
  CHECK(p == std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0});
  std::vector<double> y(x.size());
  nn::layer_scratch<double> s;
  gn.forward(p.data(), x.data(), y.data(), batch, s);
  for (std::size_t g = 0; g < 4; ++g) {  // (sample, group) blocks of 18
    double m = 0, v = 0;
    for (std::size_t i = 0; i < 18; ++i) m += y[g * 18 + i] / 18;
    for (std::size_t i = 0; i < 18; ++i) v += (y[g * 18 + i] - m) * (y[g * 18 + i] - m) / 18;
    CHECK(std::abs(m) < 1e-12);
    CHECK(v == Approx(1.0).epsilon(1e-5));  // var / (var + eps)
  }
  check_layer(gn, batch, 32);
  check_layer(nn::group_norm({16, 2, 2}, 4), 3, 33);
  check_layer(nn::group_norm({6, 1, 1}, 1), 2, 34);  // after a dense layer
}

TEST_CASE("evo_norm_s0: forward matches its formula, gradients match finite differences", "[nn]") {
  const nn::evo_norm_s0 en({4, 2, 3}, 2);
  const std::size_t batch = 2;
  const auto x = randn(batch * 24, 41);
  const auto p = randn(12, 42);
  std::vector<double> y(x.size());
  nn::layer_scratch<double> s;
  en.forward(p.data(), x.data(), y.data(), batch, s);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t g = 0; g < 2; ++g) {
      const double* xg = x.data() + (b * 2 + g) * 12;
      double m = 0, v = 0;
      for (std::size_t i = 0; i < 12; ++i) m += xg[i] / 12;
      for (std::size_t i = 0; i < 12; ++i) v += (xg[i] - m) * (xg[i] - m) / 12;
      for (std::size_t i = 0; i < 12; ++i) {
        const std::size_t c = g * 2 + i / 6;
        const double expect = xg[i] / (1 + std::exp(-p[8 + c] * xg[i])) / std::sqrt(v + 1e-5) * p[c] + p[4 + c];
        CHECK(y[(b * 2 + g) * 12 + i] == Approx(expect).epsilon(1e-12));
      }
    }
  check_layer(en, batch, 43);
  check_layer(nn::evo_norm_s0({8, 3, 3}, 4), 3, 44);
}

TEST_CASE("softmax cross-entropy: value, stability and gradient", "[nn]") {
  const std::size_t batch = 3, classes = 4;
  auto z = randn(batch * classes, 51, 2.0);
  const std::vector<std::uint8_t> labels{2, 0, 3};
  double naive = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    double sum = 0;
    for (std::size_t c = 0; c < classes; ++c) sum += std::exp(z[b * classes + c]);
    naive += -std::log(std::exp(z[b * classes + labels[b]]) / sum) / batch;
  }
  std::vector<double> dz(z.size());
  CHECK(nn::softmax_cross_entropy(z.data(), labels.data(), batch, classes, dz.data()) == Approx(naive).epsilon(1e-12));
  const auto ndz = numeric_grad(z, [&] { return nn::softmax_cross_entropy<double>(z.data(), labels.data(), batch, classes, nullptr); });
  CHECK(rel_err(dz, ndz) < 1e-6);

  // huge logits neither overflow nor lose the answer
  const std::vector<float> big{1000.f, 0.f, -1000.f};
  const std::uint8_t l0 = 0, l1 = 1;
  std::vector<float> d(3);
  CHECK(nn::softmax_cross_entropy(big.data(), &l0, 1, 3, d.data()) == Approx(0.0).margin(1e-6));
  CHECK(nn::softmax_cross_entropy(big.data(), &l1, 1, 3, d.data()) == Approx(1000.0).epsilon(1e-6));
  CHECK(std::isfinite(d[0]));
  CHECK(d[0] == Approx(1.0f));
  CHECK(d[1] == Approx(-1.0f));
}

TEST_CASE("model: loss_and_grad matches finite differences (double) at random coordinates", "[nn]") {
  struct cfg {
    std::string name;
    std::size_t c, h, w, classes, batch;
  };
  for (const auto& c : {cfg{"mlp", 1, 6, 6, 5, 3}, cfg{"cnn", 1, 8, 8, 10, 2}, cfg{"cnn", 2, 9, 8, 3, 2},
                        cfg{"cnn_evonorm", 1, 8, 8, 4, 2}, cfg{"cnn_range_evonorm", 1, 8, 8, 4, 2}}) {
    const auto m = nn::model::make(c.name, c.c, c.h, c.w, c.classes);
    INFO(m.describe());
    std::vector<double> p(m.num_params());
    m.init(std::span<double>(p), 7);
    const auto jitter = randn(p.size(), 99, 0.05);  // move norm scales and biases off their init
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += jitter[i];
    const auto x = randn(c.batch * m.input_size(), 8);
    std::vector<std::uint8_t> y(c.batch);
    for (std::size_t b = 0; b < c.batch; ++b) y[b] = std::uint8_t((b * 7 + 3) % c.classes);
    nn::workspace ws;
    std::vector<double> g(p.size());
    const double l = m.loss_and_grad(p, x.data(), y.data(), c.batch, g, ws);
    CHECK(l == Approx(m.loss(std::span<const double>(p), x.data(), y.data(), c.batch, ws)).epsilon(1e-14));
    // coordinates: a few in every layer with parameters, plus random ones
    std::vector<std::size_t> coords;
    std::mt19937_64 gen(3);
    for (std::size_t i = 0; i < m.layers().size(); ++i) {
      const std::size_t lo = m.param_offset(i), hi = m.param_offset(i + 1);
      for (int k = 0; k < 4 && hi > lo; ++k) coords.push_back(lo + gen() % (hi - lo));
    }
    for (int k = 0; k < 10; ++k) coords.push_back(gen() % p.size());
    std::vector<double> analytic, numeric;
    for (std::size_t i : coords) {
      const double keep = p[i], h = 1e-6;
      p[i] = keep + h;
      const double up = m.loss(std::span<const double>(p), x.data(), y.data(), c.batch, ws);
      p[i] = keep - h;
      const double down = m.loss(std::span<const double>(p), x.data(), y.data(), c.batch, ws);
      p[i] = keep;
      analytic.push_back(g[i]);
      numeric.push_back((up - down) / (2 * h));
    }
    CHECK(rel_err(analytic, numeric) < 1e-6);
  }
}

TEST_CASE("model: the float path agrees with the double path on full-size models", "[nn]") {
  for (const std::string name : {"mlp", "cnn", "cnn_evonorm"}) {
    const auto m = nn::model::make(name);
    std::vector<float> pf(m.num_params());
    m.init(pf, 11);
    const std::vector<double> pd(pf.begin(), pf.end());
    const std::size_t batch = 4;
    const auto xd = randn(batch * m.input_size(), 12);
    const auto xf = cast<float>(xd);
    const std::vector<std::uint8_t> y{1, 9, 0, 4};
    nn::workspace ws;
    std::vector<float> gf(pf.size());
    std::vector<double> gd(pd.size());
    const float lf = m.loss_and_grad(pf, xf.data(), y.data(), batch, gf, ws);
    const double ld = m.loss_and_grad(pd, xd.data(), y.data(), batch, gd, ws);
    INFO(name);
    CHECK(lf == Approx(ld).epsilon(1e-5));
    CHECK(rel_err(std::vector<double>(gf.begin(), gf.end()), gd) < 1e-4);
  }
}

TEST_CASE("model: the mlp learns a small synthetic task", "[nn]") {
  // 4 classes of noisy prototypes, 200 samples of 1x12x12
  const std::size_t n = 200, classes = 4;
  const auto m = nn::model::make("mlp", 1, 12, 12, classes);
  const std::size_t d = m.input_size();
  const auto protos = randn(classes * d, 61);
  const auto noise = randn(n * d, 62);
  std::vector<float> x(n * d);
  std::vector<std::uint8_t> y(n);
  for (std::size_t i = 0; i < n; ++i) {
    y[i] = std::uint8_t(i % classes);
    for (std::size_t j = 0; j < d; ++j) x[i * d + j] = float(protos[y[i] * d + j] + noise[i * d + j]);
  }
  std::vector<float> p(m.num_params()), g(p.size()), v(p.size(), 0.f), dir(p.size());
  m.init(p, 1);
  nn::workspace ws;
  const nn::sgd opt{0.9, true, 1e-4};
  const nn::lr_schedule lr{0.02, nn::lr_schedule::kind::cosine, 10};
  const std::size_t batch = 20, steps = 150;
  const auto t0 = std::chrono::steady_clock::now();
  const float first = m.loss(p, x.data(), y.data(), n, ws);
  for (std::size_t t = 0; t < steps; ++t) {
    const std::size_t off = (t * batch) % n;
    m.loss_and_grad(p, x.data() + off * d, y.data() + off, batch, g, ws);
    opt.direction(g, p, v, dir);
    const float step = float(lr.at(std::uint32_t(t), std::uint32_t(steps)));
    for (std::size_t i = 0; i < p.size(); ++i) p[i] -= step * dir[i];
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const float last = m.loss(p, x.data(), y.data(), n, ws);
  const std::size_t correct = m.count_correct(p, x.data(), y.data(), n, ws);
  INFO("loss " << first << " -> " << last << ", " << correct << "/" << n << " correct, " << secs << " s");
  CHECK(last < 0.1f * first);
  CHECK(correct > std::size_t(0.95 * n));
#ifdef NDEBUG
  CHECK(secs < 2.0);  // optimised builds only
#endif
}

TEST_CASE("model: init is deterministic by seed and He-scaled", "[nn]") {
  const auto m = nn::model::make("cnn");
  std::vector<float> a(m.num_params()), b(a.size()), c(a.size());
  m.init(a, 5);
  m.init(b, 5);
  m.init(c, 6);
  CHECK(a == b);
  CHECK(a != c);
  // first conv: 144 weights, sd sqrt(2 / 9); then 16 zero biases; group norm gamma 1, beta 0
  double ss = 0;
  for (std::size_t i = 0; i < 144; ++i) ss += double(a[i]) * a[i];
  CHECK(std::sqrt(ss / 144) == Approx(std::sqrt(2.0 / 9)).epsilon(0.2));
  for (std::size_t i = 144; i < 160; ++i) CHECK(a[i] == 0.f);
  for (std::size_t i = 160; i < 176; ++i) CHECK(a[i] == 1.f);
  for (std::size_t i = 176; i < 192; ++i) CHECK(a[i] == 0.f);
  // the sampler itself is reproducible: first draws of seed 0 are fixed numbers on every platform
  nn::normal_rng r1(0), r2(0);
  for (int i = 0; i < 5; ++i) CHECK(r1.normal() == r2.normal());
}

TEST_CASE("model: shapes, parameter counts and describe()", "[nn]") {
  const auto cnn = nn::model::make("cnn");
  CHECK(cnn.name() == "cnn");
  CHECK(cnn.num_params() == 160 + 32 + 4640 + 64 + 15690);
  CHECK(cnn.num_classes() == 10);
  CHECK(cnn.input_size() == 784);
  const auto mlp = nn::model::make("mlp");
  CHECK(mlp.num_params() == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
  CHECK(nn::model::make("cnn_evonorm").num_params() == 160 + 48 + 4640 + 96 + 15690);
  const std::string desc = cnn.describe();
  CHECK(std::count(desc.begin(), desc.end(), '\n') == std::ptrdiff_t(cnn.layers().size() + 1));
  CHECK(desc.find("conv2d 1x28x28 -> 16x28x28") != std::string::npos);
  CHECK(desc.find("20586 params") != std::string::npos);
  CHECK(nn::model::make("cnn", 3, 32, 32, 10).input_size() == 3 * 32 * 32);
}

TEST_CASE("model: predict is the argmax, the workspace is reusable across batch sizes", "[nn]") {
  const auto m = nn::model::make("cnn");
  std::vector<float> p(m.num_params());
  m.init(p, 3);
  const auto x = cast<float>(randn(16 * 784, 4));
  std::vector<std::uint8_t> y(16);
  for (std::size_t i = 0; i < 16; ++i) y[i] = std::uint8_t(i % 10);
  nn::workspace ws, fresh;
  std::vector<float> g1(p.size()), g2(p.size());
  const float l1 = m.loss_and_grad(p, x.data(), y.data(), 4, g1, fresh);
  m.loss_and_grad(p, x.data(), y.data(), 16, g2, ws);  // grow first, then a smaller batch
  const float l2 = m.loss_and_grad(p, x.data(), y.data(), 4, g2, ws);
  CHECK(l1 == l2);
  CHECK(g1 == g2);
  std::vector<std::uint8_t> pred(16);
  m.predict(p, x.data(), 16, pred.data(), ws);
  // a one-image batch gives the same answer as inside the batch
  for (std::size_t i = 0; i < 16; ++i) {
    std::uint8_t one = 255;
    m.predict(p, x.data() + i * 784, 1, &one, ws);
    CHECK(one == pred[i]);
  }
}

TEST_CASE("model: the inference path gives the training forward pass's logits bit for bit", "[nn]") {
  struct cfg {
    std::string name;
    std::size_t c, h, w, classes;
  };
  // full size, and odd sizes (pools drop a row and a column; the fused norm-relu-pool must too)
  for (const auto& [name, ch, h, w, classes] : {cfg{"mlp", 1, 28, 28, 10}, cfg{"cnn", 1, 28, 28, 10},
                                                 cfg{"cnn_evonorm", 1, 28, 28, 10}, cfg{"cnn", 2, 11, 9, 3}}) {
    const auto m = nn::model::make(name, ch, h, w, classes);
    std::vector<float> p(m.num_params());
    m.init(p, 31);
    const auto jitter = cast<float>(randn(p.size(), 32, 0.05));  // norm scales and biases off their init
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += jitter[i];
    const std::size_t batch = 2 * nn::model::inference_chunk + 5;  // whole chunks and a ragged one
    const auto x = cast<float>(randn(batch * m.input_size(), 33));
    std::vector<std::uint8_t> y(batch);
    for (std::size_t b = 0; b < batch; ++b) y[b] = std::uint8_t((b * 3 + 1) % m.num_classes());
    // the training forward pass, layer by layer over the whole batch (as loss_and_grad runs it)
    nn::layer_scratch<float> s;
    std::vector<float> cur(x);
    for (std::size_t i = 0; i < m.layers().size(); ++i) {
      const std::size_t out = std::visit([](const auto& l) { return l.out_shape().size(); }, m.layers()[i]);
      std::vector<float> next(batch * out);
      std::visit([&](const auto& l) { l.forward(p.data() + m.param_offset(i), cur.data(), next.data(), batch, s); },
                 m.layers()[i]);
      cur = std::move(next);
    }
    nn::workspace ws;
    std::vector<float> logits(batch * m.num_classes(), std::numeric_limits<float>::quiet_NaN());
    m.logits(p, x.data(), batch, logits.data(), ws);
    INFO(name);
    CHECK(logits == cur);
    // the loss from these logits is the training pass's loss, to the bit
    const double from_logits = nn::softmax_cross_entropy<float>(logits.data(), y.data(), batch, m.num_classes(), nullptr);
    CHECK(float(from_logits) == m.loss(p, x.data(), y.data(), batch, ws));
    std::vector<float> g(p.size());
    CHECK(float(from_logits) == m.loss_and_grad(p, x.data(), y.data(), batch, g, ws));
    // one image at a time gives the same logits; predict is their argmax
    for (std::size_t b = 0; b < batch; b += 7) {
      std::vector<float> one(m.num_classes());
      m.logits(p, x.data() + b * m.input_size(), 1, one.data(), ws);
      CHECK(std::equal(one.begin(), one.end(), logits.begin() + std::ptrdiff_t(b * m.num_classes())));
    }
    std::vector<std::uint8_t> pred(batch);
    m.predict(p, x.data(), batch, pred.data(), ws);
    std::size_t right = 0;
    for (std::size_t b = 0; b < batch; ++b) {
      const float* z = logits.data() + b * m.num_classes();
      CHECK(pred[b] == std::max_element(z, z + m.num_classes()) - z);
      right += pred[b] == y[b];
    }
    CHECK(m.count_correct(p, x.data(), y.data(), batch, ws) == right);
  }
  // bad input: named errors
  const auto m = nn::model::make("mlp", 1, 4, 4, 3);
  std::vector<float> p(m.num_params()), x(16), out(3);
  nn::workspace ws;
  CHECK_THROWS_AS(m.logits(p, x.data(), 0, out.data(), ws), size_error);
  CHECK_THROWS_AS(m.logits(p, x.data(), 1, nullptr, ws), config_error);
  CHECK_THROWS_AS(m.logits(std::span<const float>(p).first(3), x.data(), 1, out.data(), ws), size_error);
  CHECK_THROWS_AS(m.predict(p, x.data(), 0, nullptr, ws), size_error);
}

namespace {

/// group_norm, relu and a 2x2 max pool run one after the other, forward then backward, against
/// group_norm's fused pair; the unfused norm's output gradient is kept where the fused pass
/// writes dx (the model's ping-pong buffers do the same), so Eigen's sums see the same alignment.
template <class T>
void check_fused_norm_relu_pool(nn::shape3 in, std::size_t groups, std::size_t batch, std::uint64_t seed) {
  const nn::group_norm gn(in, groups);
  const nn::relu re(in);
  const nn::max_pool2d pool(in, 2, 2);
  const std::size_t n = batch * in.size(), np = batch * pool.out_shape().size();
  const auto x = cast<T>(randn(n, seed, 2.0)), dy = cast<T>(randn(np, seed + 1));
  auto p = cast<T>(randn(gn.num_params(), seed + 2, 0.5));
  for (std::size_t c = 0; c < in.c; ++c) p[c] += T(1);  // gamma around 1, beta around 0
  p[0] = T(-0.5);                                       // a negative scale: its maxima flip
  nn::layer_scratch<T> s;
  std::vector<T> y1(n), y2(n), y3(np), d3(n), d2(n), dx(n), dp(gn.num_params());
  gn.forward(p.data(), x.data(), y1.data(), batch, s);
  const T* none = nullptr;  // relu and the pool have no parameters
  re.forward(none, y1.data(), y2.data(), batch, s);
  pool.forward(none, y2.data(), y3.data(), batch, s);
  pool.backward(none, y2.data(), y3.data(), dy.data(), d3.data(), static_cast<T*>(nullptr), batch, s);
  re.backward(none, y1.data(), y2.data(), d3.data(), d2.data(), static_cast<T*>(nullptr), batch, s);
  std::vector<T> buf(n);  // the norm's output gradient here, the fused pass's dx below
  std::copy(d2.begin(), d2.end(), buf.begin());
  gn.backward(p.data(), x.data(), y1.data(), buf.data(), dx.data(), dp.data(), batch, s);
  // at every level: the windows' AVX-512 kernels give the scalar loops' bits
  for (const auto level : {nn::detail::simd_level::baseline, nn::detail::simd_level::avx2,
                           nn::detail::simd_level::avx512}) {
    std::vector<T> yf(np), dpf(dp.size());
    std::vector<double> stats(2 * batch * groups);
    std::fill(buf.begin(), buf.end(), T(7));  // every element of dx is written
    gn.forward_relu_max_pool2(p.data(), x.data(), yf.data(), batch, stats.data(), level);
    gn.backward_relu_max_pool2(p.data(), x.data(), stats.data(), dy.data(), buf.data(), dpf.data(), batch, s, level);
    INFO(in.str() << ", groups " << groups << ", batch " << batch << ", " << nn::detail::simd_name(level));
    CHECK(yf == y3);
    CHECK(buf == dx);
    CHECK(dpf == dp);
  }
  std::size_t zeros = 0;  // the case is not trivial: ReLU cuts some of the gradient
  for (const T v : d2) zeros += v == T(0);
  CHECK(zeros > n * 3 / 4);
  CHECK(zeros < n);
}

/// loss_and_grad as the model ran it before the fusion: every layer's forward(), then every
/// layer's backward() through two ping-pong buffers.
template <class T>
double unfused_loss_and_grad(const nn::model& m, const std::vector<T>& p, const std::vector<T>& x,
                             const std::vector<std::uint8_t>& labels, std::size_t batch, std::vector<T>& grad) {
  nn::layer_scratch<T> s;
  const std::size_t L = m.layers().size();
  std::vector<std::vector<T>> acts(L);
  std::size_t widest = m.input_size();
  const T* cur = x.data();
  for (std::size_t i = 0; i < L; ++i) {
    const std::size_t out = std::visit([](const auto& l) { return l.out_shape().size(); }, m.layers()[i]);
    widest = std::max(widest, out);
    acts[i].resize(batch * out);
    std::visit([&](const auto& l) { l.forward(p.data() + m.param_offset(i), cur, acts[i].data(), batch, s); },
               m.layers()[i]);
    cur = acts[i].data();
  }
  std::vector<T> ga(batch * widest), gb(batch * widest);
  const double loss = nn::softmax_cross_entropy<T>(cur, labels.data(), batch, m.num_classes(), ga.data());
  for (std::size_t i = L; i-- > 0;) {
    const T* xi = i ? acts[i - 1].data() : x.data();
    std::visit([&](const auto& l) {
      l.backward(p.data() + m.param_offset(i), xi, acts[i].data(), ga.data(), i ? gb.data() : nullptr,
                 grad.data() + m.param_offset(i), batch, s);
    }, m.layers()[i]);
    std::swap(ga, gb);
  }
  return loss;
}

}  // namespace

TEST_CASE("group_norm: the fused norm-relu-max-pool training pass gives the unfused bits", "[nn]") {
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    check_fused_norm_relu_pool<float>({16, 28, 28}, 4, 3, 100 + seed);
    check_fused_norm_relu_pool<float>({32, 14, 14}, 4, 2, 200 + seed);
    check_fused_norm_relu_pool<float>({6, 7, 9}, 3, 3, 300 + seed);  // odd: the last row and column in no window
    check_fused_norm_relu_pool<float>({4, 5, 6}, 1, 1, 400 + seed);
    check_fused_norm_relu_pool<float>({2, 6, 70}, 2, 2, 600 + seed);  // 35 windows a row: two vectors and a tail
    check_fused_norm_relu_pool<double>({8, 6, 10}, 2, 2, 500 + seed);
  }
}

TEST_CASE("model: loss_and_grad with the fused norm-relu-pool gives the unfused layer-by-layer bits", "[nn]") {
  struct cfg {
    std::string name;
    std::size_t c, h, w, classes, batch;
  };
  // every gemm level gives the same bits (the gemm test), so this holds at each of them
  for (const auto& [name, ch, h, w, classes, batch] : {cfg{"cnn", 1, 28, 28, 10, 32}, cfg{"cnn", 2, 11, 9, 3, 5},
                                                        cfg{"cnn", 3, 8, 12, 4, 7}}) {
    const auto m = nn::model::make(name, ch, h, w, classes);
    std::vector<float> p(m.num_params());
    m.init(p, 41);
    const auto jitter = cast<float>(randn(p.size(), 42, 0.05));
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += jitter[i];
    const auto x = cast<float>(randn(batch * m.input_size(), 43));
    std::vector<std::uint8_t> y(batch);
    for (std::size_t b = 0; b < batch; ++b) y[b] = std::uint8_t((b * 7 + 2) % m.num_classes());
    std::vector<float> g(p.size()), ref(p.size());
    nn::workspace ws;
    const float loss = m.loss_and_grad(p, x.data(), y.data(), batch, g, ws);
    const double ref_loss = unfused_loss_and_grad<float>(m, p, x, y, batch, ref);
    INFO(name << " " << ch << "x" << h << "x" << w << ", batch " << batch);
    CHECK(loss == float(ref_loss));
    CHECK(g == ref);
    // again with the workspace warm (its buffers reused) and in double
    CHECK(m.loss_and_grad(p, x.data(), y.data(), batch, g, ws) == loss);
    CHECK(g == ref);
    const auto pd = cast<double>(std::vector<double>(p.begin(), p.end()));
    const std::vector<double> xd(x.begin(), x.end());
    std::vector<double> gd(p.size()), refd(p.size());
    const double lossd = m.loss_and_grad(std::span<const double>(pd), xd.data(), y.data(), batch, std::span<double>(gd), ws);
    CHECK(lossd == unfused_loss_and_grad<double>(m, pd, xd, y, batch, refd));
    CHECK(gd == refd);
  }
}

TEST_CASE("model: gradients and logits are the same bits run to run and on concurrent threads", "[nn]") {
  const auto m = nn::model::make("cnn");
  std::vector<float> p(m.num_params());
  m.init(p, 41);
  const std::size_t batch = 32;
  const auto x = cast<float>(randn(batch * m.input_size(), 42));
  std::vector<std::uint8_t> y(batch);
  for (std::size_t b = 0; b < batch; ++b) y[b] = std::uint8_t(b % 10);
  struct result {
    float loss = 0;
    std::vector<float> grad, logits;
  };
  auto compute = [&](result& r) {
    nn::workspace ws;
    r.grad.assign(p.size(), 0.f);
    r.logits.assign(batch * 10, 0.f);
    r.loss = m.loss_and_grad(p, x.data(), y.data(), batch, r.grad, ws);
    m.logits(p, x.data(), batch, r.logits.data(), ws);
  };
  result first, again;
  compute(first);
  compute(again);
  CHECK(first.loss == again.loss);
  CHECK(first.grad == again.grad);
  CHECK(first.logits == again.logits);
  std::vector<result> threaded(4);
  {
    std::vector<std::thread> ts;  // no assertions inside: each thread only fills its result
    for (auto& r : threaded) ts.emplace_back([&compute, &r] { compute(r); });
    for (auto& t : ts) t.join();
  }
  for (const auto& r : threaded) {
    CHECK(r.loss == first.loss);
    CHECK(r.grad == first.grad);
    CHECK(r.logits == first.logits);
  }
}

TEST_CASE("model: profile counts parameters, activations and FLOPs linear in batch", "[nn]") {
  for (const std::string name : {"mlp", "cnn", "cnn_evonorm"}) {
    const auto m = nn::model::make(name);
    const auto p1 = m.profile(1), p32 = m.profile(32);
    CHECK(p1.parameters == m.num_params());
    CHECK(p32.parameters == m.num_params());
    CHECK(p1.flops > 0);
    CHECK(p32.flops == Approx(32 * p1.flops));
    CHECK(p1.activation_bytes > 0);
    CHECK(p32.activation_bytes == 32 * p1.activation_bytes);
  }
  // the mlp's GEMMs dominate: forward 2 * 235,520 MACs, backward twice that less the first dx
  const auto mlp = nn::model::make("mlp").profile(1);
  const double macs = 784.0 * 256 + 256.0 * 128 + 128.0 * 10;
  CHECK(mlp.flops > 2 * 3 * macs - 2 * 784.0 * 256);
  CHECK(mlp.flops < 1.01 * (2 * 3 * macs - 2 * 784.0 * 256));
}

TEST_CASE("sgd: direction matches the formula", "[nn]") {
  const std::vector<float> g{1.0f, -2.0f, 0.5f}, x{2.0f, 1.0f, -4.0f};
  for (const bool nesterov : {false, true}) {
    const nn::sgd opt{0.9, nesterov, 0.1};
    std::vector<float> v{0.5f, 0.0f, -1.0f}, out(3);
    opt.direction(g, x, v, out);
    for (std::size_t i = 0; i < 3; ++i) {
      const double p = double(g[i]) + 0.1 * x[i];
      const double v0[] = {0.5, 0.0, -1.0};
      const double vn = 0.9 * v0[i] + p;
      CHECK(v[i] == Approx(vn).epsilon(1e-6));
      CHECK(out[i] == Approx(nesterov ? p + 0.9 * vn : vn).epsilon(1e-6));
    }
  }
  // by hand: g = 1, x = 2, wd = 0.1 -> p = 1.2; v = 0.9 * 0.5 + 1.2 = 1.65; nesterov 1.2 + 1.485
  std::vector<float> v{0.5f}, out(1);
  nn::sgd{0.9, true, 0.1}.direction(std::span<const float>(g).first(1), std::span<const float>(x).first(1), v, out);
  CHECK(v[0] == Approx(1.65f));
  CHECK(out[0] == Approx(2.685f));
  // plain SGD: no momentum, no decay -> the gradient itself
  std::vector<float> v0(3, 0.f), o0(3);
  nn::sgd{0.0, false, 0.0}.direction(g, x, v0, o0);
  CHECK(o0 == g);
  // out may alias grad
  std::vector<float> ga = g, va(3, 0.f);
  nn::sgd{0.9, true, 0.1}.direction(ga, x, va, ga);
  CHECK(ga[0] == Approx(1.2f + 0.9f * 1.2f));
  std::vector<float> shortv(2);
  CHECK_THROWS_AS(nn::sgd{}.direction(g, x, shortv, o0), size_error);
  CHECK_THROWS_AS((nn::sgd{1.5, false, 0.0}.direction(g, x, v0, o0)), config_error);
}

TEST_CASE("lr_schedule: constant, step, cosine and warm-up", "[nn]") {
  using K = nn::lr_schedule::kind;
  const nn::lr_schedule constant{0.1};
  CHECK(constant.at(0, 100) == 0.1);
  CHECK(constant.at(99, 100) == 0.1);

  const nn::lr_schedule step{0.1, K::step, 0, 0.1, {0.5, 0.75}};
  CHECK(step.at(49, 100) == Approx(0.1));
  CHECK(step.at(50, 100) == Approx(0.01));
  CHECK(step.at(74, 100) == Approx(0.01));
  CHECK(step.at(75, 100) == Approx(0.001));
  CHECK(nn::lr_schedule{0.2, K::step}.at(80, 100) == Approx(0.02));  // default: x0.1 at 75%

  const nn::lr_schedule cosine{0.1, K::cosine};
  CHECK(cosine.at(0, 100) == Approx(0.1));
  CHECK(cosine.at(50, 100) == Approx(0.05));
  CHECK(cosine.at(25, 100) == Approx(0.05 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(cosine.at(100, 100) == Approx(0.0).margin(1e-15));

  const nn::lr_schedule warm{0.1, K::cosine, 10};
  CHECK(warm.at(0, 110) == Approx(0.01));
  CHECK(warm.at(5, 110) == Approx(0.01 + 0.09 * 0.5));
  CHECK(warm.at(10, 110) == Approx(0.1));
  CHECK(warm.at(60, 110) == Approx(0.05));
  nn::lr_schedule warm0 = warm;
  warm0.warmup_from_zero = true;
  CHECK(warm0.at(0, 110) == 0.0);
  CHECK(warm0.at(5, 110) == Approx(0.05));
  const nn::lr_schedule warm_const{0.1, K::constant, 4};
  CHECK(warm_const.at(2, 100) == Approx(0.01 + 0.09 * 0.5));
  CHECK(warm_const.at(4, 100) == 0.1);

  CHECK_THROWS_AS((nn::lr_schedule{-1.0}.at(0, 10)), config_error);
  CHECK_THROWS_AS((nn::lr_schedule{0.1, K::step, 0, 0.1, {1.5}}.at(0, 10)), config_error);
}

TEST_CASE("nn: bad inputs give clear errors", "[nn]") {
  try {
    nn::model::make("resnet");
    FAIL("no throw");
  } catch (const config_error& e) {
    const std::string what = e.what();
    CHECK(what.find("resnet") != std::string::npos);
    CHECK(what.find("mlp") != std::string::npos);
    CHECK(what.find("cnn") != std::string::npos);
  }
  CHECK_THROWS_AS(nn::model::make("cnn", 1, 3, 3), config_error);
  CHECK_THROWS_AS(nn::model::make("mlp", 1, 28, 28, 1), config_error);
  const auto m = nn::model::make("mlp", 1, 4, 4, 3);
  std::vector<float> p(m.num_params() - 1), g(m.num_params()), x(16);
  nn::workspace ws;
  try {
    m.init(p, 1);
    FAIL("no throw");
  } catch (const size_error& e) {
    CHECK(std::string(e.what()).find(std::to_string(m.num_params())) != std::string::npos);
  }
  const std::uint8_t label = 1, bad_label = 3;
  CHECK_THROWS_AS(m.loss_and_grad(p, x.data(), &label, 1, g, ws), size_error);
  p.resize(m.num_params());
  std::vector<float> g_short(3);
  CHECK_THROWS_AS(m.loss_and_grad(p, x.data(), &label, 1, g_short, ws), size_error);
  CHECK_THROWS_AS(m.loss(p, x.data(), &bad_label, 1, ws), config_error);
  CHECK_THROWS_AS(m.loss(p, x.data(), &label, 0, ws), size_error);
  CHECK_NOTHROW(m.loss(p, x.data(), &label, 1, ws));
  CHECK_THROWS_AS(nn::conv2d({1, 4, 4}, 2, 3, 1, 3), config_error);      // pad >= k
  CHECK_THROWS_AS(nn::group_norm({6, 2, 2}, 4), config_error);           // 6 channels, 4 groups
  CHECK_THROWS_AS(nn::max_pool2d({1, 1, 1}, 2), config_error);            // window larger than input
  CHECK_THROWS_AS(nn::model::from_layers("x", {1, 4, 4}, {nn::layer(nn::dense({8, 1, 1}, 2))}), config_error);
}
