// Tests of sparsepush/tensor.hpp: the traits door, std adapters, a user type, resize-or-check.
#include <array>
#include <catch2/catch.hpp>
#include <memory>
#include <sparsepush/tensor.hpp>
#include <span>
#include <vector>

namespace {
// A user type with an owning buffer and no range interface.
struct owned_buffer {
  std::unique_ptr<double[]> p;
  std::size_t n = 0;
};
}  // namespace

template <>
struct sparsepush::tensor_traits<owned_buffer> {
  using value_type = double;
  static double* data(owned_buffer& b) { return b.p.get(); }
  static const double* data(const owned_buffer& b) { return b.p.get(); }
  static std::size_t size(const owned_buffer& b) { return b.n; }
};

using namespace sparsepush;

static_assert(flat_tensor<std::vector<float>>);
static_assert(flat_tensor<std::vector<double>>);
static_assert(flat_tensor<std::array<float, 4>>);
static_assert(flat_tensor<std::span<float>>);
static_assert(flat_tensor<std::span<const double>>);
static_assert(flat_tensor<owned_buffer>);
static_assert(mutable_flat_tensor<std::vector<float>&>);
static_assert(!mutable_flat_tensor<const std::vector<float>&>);
static_assert(!mutable_flat_tensor<std::span<const float>&>);
static_assert(!flat_tensor<std::vector<int>>);
static_assert(!flat_tensor<std::vector<long double>>);
static_assert(!flat_tensor<int>);
static_assert(std::is_same_v<tensor_value_t<std::array<double, 2>>, double>);

TEST_CASE("as_span views the same storage for std types and user types", "[tensor]") {
  std::vector<float> v{1, 2, 3};
  auto s = as_span(v);
  STATIC_REQUIRE(std::is_same_v<decltype(s), std::span<float>>);
  REQUIRE(s.data() == v.data());
  REQUIRE(s.size() == 3);
  s[1] = 7;
  REQUIRE(v[1] == 7);

  const std::vector<float>& cv = v;
  auto cs = as_span(cv);
  STATIC_REQUIRE(std::is_same_v<decltype(cs), std::span<const float>>);

  std::array<double, 5> a{};
  REQUIRE(as_span(a).size() == 5);
  REQUIRE(as_const_span(a).data() == a.data());

  owned_buffer b{std::make_unique<double[]>(4), 4};
  auto bs = as_span(b);
  STATIC_REQUIRE(std::is_same_v<decltype(bs), std::span<double>>);
  bs[3] = 2.5;
  REQUIRE(b.p[3] == 2.5);
}

TEST_CASE("zeros_like and resize_or_check", "[tensor]") {
  std::vector<double> v{1, 2, 3};
  auto z = zeros_like(v);
  REQUIRE(z == std::vector<double>(3, 0.0));
  resize_or_check(z, 5);
  REQUIRE(z.size() == 5);

  std::array<float, 3> a{};
  REQUIRE_NOTHROW(resize_or_check(a, 3));
  REQUIRE_THROWS_AS(resize_or_check(a, 4), size_error);
  std::span<float> s(a);
  try {
    resize_or_check(s, 9, "residual");
    FAIL("expected size_error");
  } catch (const size_error& e) {
    const std::string msg = e.what();
    REQUIRE(msg.find("residual") != std::string::npos);
    REQUIRE(msg.find('3') != std::string::npos);
    REQUIRE(msg.find('9') != std::string::npos);
  }
}
