// custom_backend: plug a user-defined tensor type into sparsepush with one traits
// specialization, then run error-compensated top-K compression on it for a few rounds and
// decode what would travel. Run: ./custom_backend
#include <cmath>
#include <cstdio>
#include <memory>
#include <sparsepush/sparsepush.hpp>

// [readme-custom-tensor-begin]
// A tensor type of your own: an owning buffer, no range interface.
struct my_tensor {
  std::unique_ptr<float[]> data;
  std::size_t size = 0;
};

// One specialization is all sparsepush needs to see it as a flat float tensor.
template <>
struct sparsepush::tensor_traits<my_tensor> {
  using value_type = float;
  static float* data(my_tensor& t) { return t.data.get(); }
  static const float* data(const my_tensor& t) { return t.data.get(); }
  static std::size_t size(const my_tensor& t) { return t.size; }
  static my_tensor zeros_like(const my_tensor& t) {
    return {std::make_unique<float[]>(t.size), t.size};  // value-initialised: zeros
  }
};
// [readme-custom-tensor-end]

int main() {
  namespace sp = sparsepush;
  const std::size_t d = 100000;
  my_tensor x{std::make_unique<float[]>(d), d};

  // [readme-usage-begin]
  my_tensor residual = sp::zeros_like(x);                // e_i, starts at zero
  const auto compress = sp::parse_compressor("top-k:0.01+fp16");
  sp::message q;                                         // reused every round
  for (std::uint32_t round = 0; round < 5; ++round) {
    for (std::size_t i = 0; i < d; ++i)                  // stand-in for a local SGD step
      x.data[i] = std::sin(0.001f * static_cast<float>(i * (round + 1)));
    // v = x + e; q = C(v); e = v - q, in two streaming passes
    sp::compress_with_feedback(compress, x, residual, q, {/*seed*/ 1, /*node*/ 0, round});
    const std::vector<std::byte> wire = sp::encode(q);   // what is pushed to out-neighbours
    const sp::message received = sp::decode(wire);       // validated on arrival
    std::printf("round %u: %u of %u values, %zu bytes on the wire (%.1fx smaller than fp32)\n",
                round, received.count, received.dim, wire.size(),
                4.0 * static_cast<double>(d) / static_cast<double>(wire.size()));
  }
  // [readme-usage-end]

  double e_norm = 0;
  for (float e : sp::as_const_span(residual)) e_norm += static_cast<double>(e) * e;
  std::printf("residual norm after 5 rounds: %.3f\n", std::sqrt(e_norm));
  return 0;
}
