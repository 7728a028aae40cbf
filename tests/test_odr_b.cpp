// Second translation unit of the ODR check (see test_odr_a.cpp).
#include <sparsepush/sparsepush.hpp>
#include <vector>

std::size_t odr_b_wire_bytes(const std::vector<float>& v) {
  sparsepush::message m;
  sparsepush::compress(sparsepush::top_k{sparsepush::k_spec::fraction(0.01), {sparsepush::value_encoding::i8, 0}},
                       std::span<const float>(v), m, {});
  return sparsepush::encode(m).size();
}
