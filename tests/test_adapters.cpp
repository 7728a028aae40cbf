// Tests of sparsepush/adapters/{eigen,xtensor}.hpp: the same compressor, with and without error
// feedback, gives identical bytes on std::vector, std::span, std::array, Eigen and xtensor.
#include <Eigen/Core>
#include <array>
#include <catch2/catch.hpp>
#include <sparsepush/adapters/eigen.hpp>
#include <sparsepush/adapters/xtensor.hpp>
#include <sparsepush/sparsepush.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include "test_util.hpp"

using namespace sparsepush;

static_assert(flat_tensor<Eigen::VectorXf> && flat_tensor<Eigen::VectorXd>);
static_assert(flat_tensor<Eigen::MatrixXf> && flat_tensor<Eigen::ArrayXXd>);
static_assert(mutable_flat_tensor<Eigen::Map<Eigen::VectorXf>&>);
static_assert(flat_tensor<Eigen::Map<const Eigen::VectorXf>>);
static_assert(!mutable_flat_tensor<Eigen::Map<const Eigen::VectorXf>&>);
static_assert(!flat_tensor<Eigen::Map<Eigen::VectorXf, 0, Eigen::InnerStride<2>>>);  // strided
static_assert(!flat_tensor<Eigen::VectorXi>);
static_assert(mutable_flat_tensor<xt::xarray<float>&> && mutable_flat_tensor<xt::xtensor<double, 2>&>);
static_assert(!flat_tensor<xt::xarray<int>>);

namespace {
/// Encoded bytes of C(v) and, after two feedback rounds, of q and e, for one tensor type.
template <class X>
std::vector<std::byte> fingerprint(const any_compressor& c, const X& x, X& e) {
  using T = tensor_value_t<X>;
  message q;
  compress(c, as_const_span(x), q, {11, 2, 3});
  auto out = encode(q);
  for (std::uint32_t r = 0; r < 2; ++r) {
    compress_with_feedback(c, x, e, q, {11, 2, r});
    encode(q, out);
  }
  const auto es = as_const_span(e);
  const auto* p = reinterpret_cast<const std::byte*>(es.data());
  out.insert(out.end(), p, p + es.size() * sizeof(T));
  return out;
}

template <class T>
void check_all_adapters(const any_compressor& c) {
  const std::size_t rows = 40, cols = 250, d = rows * cols;
  const auto base = test::gaussian<T>(d, 17);
  std::vector<T> ev(d, T(0));
  const auto ref = fingerprint(c, base, ev);

  {  // std::span over a buffer
    std::vector<T> xb = base, eb(d, T(0));
    std::span<T> xs(xb), es(eb);
    REQUIRE(fingerprint(c, xs, es) == ref);
  }
  {  // std::array
    auto xa = std::make_unique<std::array<T, 10000>>();
    auto ea = std::make_unique<std::array<T, 10000>>();
    std::copy(base.begin(), base.end(), xa->begin());
    ea->fill(T(0));
    REQUIRE(fingerprint(c, *xa, *ea) == ref);
  }
  using vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
  using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
  {  // Eigen vector
    vec x = Eigen::Map<const vec>(base.data(), static_cast<Eigen::Index>(d));
    vec e = tensor_traits<vec>::zeros_like(x);
    REQUIRE(fingerprint(c, x, e) == ref);
  }
  {  // Eigen matrix (column-major storage is the flat order)
    mat x = Eigen::Map<const mat>(base.data(), rows, cols);
    mat e = mat::Zero(rows, cols);
    REQUIRE(fingerprint(c, x, e) == ref);
  }
  {  // Eigen::Map over a user buffer
    std::vector<T> xb = base, eb(d, T(0));
    Eigen::Map<vec> x(xb.data(), static_cast<Eigen::Index>(d)), e(eb.data(), static_cast<Eigen::Index>(d));
    REQUIRE(fingerprint(c, x, e) == ref);
  }
  {  // xt::xarray (row-major storage is the flat order)
    xt::xarray<T> x = xt::adapt(base, std::vector<std::size_t>{rows, cols});
    xt::xarray<T> e = tensor_traits<xt::xarray<T>>::zeros_like(x);
    REQUIRE(e.shape() == x.shape());
    REQUIRE(fingerprint(c, x, e) == ref);
  }
  {  // xt::xtensor<T, 1>
    xt::xtensor<T, 1> x = xt::adapt(base, std::array<std::size_t, 1>{d});
    xt::xtensor<T, 1> e = xt::zeros<T>({d});
    REQUIRE(fingerprint(c, x, e) == ref);
  }
  {  // xt::adapt over user buffers
    std::vector<T> xb = base, eb(d, T(0));
    auto x = xt::adapt(xb.data(), d, xt::no_ownership(), std::vector<std::size_t>{d});
    auto e = xt::adapt(eb.data(), d, xt::no_ownership(), std::vector<std::size_t>{d});
    REQUIRE(fingerprint(c, x, e) == ref);
  }
}
}  // namespace

TEMPLATE_TEST_CASE("identical bytes on every adapter, for every compressor x encoding", "[tensor]",
                   float, double) {
  const std::vector<std::string> specs = {
      "identity", "identity+fp16", "top-k:0.01", "top-k:0.01+int8", "top-k:0.05+bf16+u32",
      "top-k:0.001+fp16", "random-k:0.01", "random-k-unbiased:0.01+qsgd:4", "threshold:0.01+sign",
      "qsgd:16", "sign", "top-k:0.02+fp64", "random-k:0.02+fp32+varint", "threshold:0.05+int8+u32"};
  for (const auto& s : specs) {
    INFO(s);
    check_all_adapters<TestType>(parse_compressor(s));
  }
}

TEST_CASE("adapters resize vectors and refuse to resize matrices", "[tensor]") {
  Eigen::VectorXf v(3);
  resize_or_check(v, 7);
  REQUIRE(v.size() == 7);
  Eigen::MatrixXd m(2, 3);
  REQUIRE_THROWS_WITH(resize_or_check(m, 7), Catch::Contains("2x3"));
  xt::xarray<double> a = xt::zeros<double>({4});
  resize_or_check(a, 9);
  REQUIRE(a.size() == 9);
  xt::xtensor<float, 2> b = xt::zeros<float>({2, 2});
  REQUIRE_THROWS_AS(resize_or_check(b, 5), size_error);
}
