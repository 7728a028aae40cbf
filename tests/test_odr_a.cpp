// Two translation units that include every core header link into one binary (ODR: no
// non-inline definitions in headers). See test_odr_b.cpp.
#include <catch2/catch.hpp>
#include <sparsepush/sparsepush.hpp>
#include <vector>

std::size_t odr_b_wire_bytes(const std::vector<float>& v);

TEST_CASE("two translation units agree on every inline entity", "[shape]") {
  std::vector<float> v(20000);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 1000) - 500.0f;
  sparsepush::message m;
  sparsepush::compress(sparsepush::parse_compressor("top-k:0.01+int8"), std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == odr_b_wire_bytes(v));
}
