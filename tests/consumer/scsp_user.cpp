// A consumer's own tensor type and own compressor, trained with SCSP through the installed
// package: 8 nodes minimise 0.5 ||x - b_i||^2 (optimum: mean_i b_i) over the time-varying ring.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <sparsepush/sparsepush.hpp>

namespace sp = sparsepush;

// A tensor with no range interface: a shared-nothing buffer and its length.
struct params {
  std::unique_ptr<double[]> p;
  std::size_t n = 0;
  explicit params(std::size_t size = 0) : p(new double[size]()), n(size) {}
  params(const params& o) : params(o.n) { std::memcpy(p.get(), o.p.get(), n * sizeof(double)); }
  params(params&&) = default;
};
template <>
struct sparsepush::tensor_traits<params> {
  using value_type = double;
  static double* data(params& t) { return t.p.get(); }
  static const double* data(const params& t) { return t.p.get(); }
  static std::size_t size(const params& t) { return t.n; }
};

// A compressor of our own: every stride-th coordinate, rotating with the round, sent as fp32.
struct strided {
  std::uint32_t stride = 4;
  template <class T>
  void compress(std::span<const T> v, sp::message& m, const sp::context& ctx) const {
    m.dim = static_cast<std::uint32_t>(v.size());
    m.index_enc = sp::index_encoding::raw_u32;
    m.value_enc = sp::value_encoding::f32;
    m.levels = 0;
    m.scale = 0.0f;
    m.indices.clear();
    m.payload.clear();
    for (std::uint32_t i = ctx.round % stride; i < v.size(); i += stride) {
      const float f = static_cast<float>(v[i]);
      m.indices.push_back(i);
      m.payload.resize(m.payload.size() + 4);
      std::memcpy(m.payload.data() + m.payload.size() - 4, &f, 4);
    }
    m.count = static_cast<std::uint32_t>(m.indices.size());
  }
};

int main() {
  const std::size_t n = 8, d = 64;
  const std::uint32_t compressed = 600, final_rounds = 9;
  auto target = [](std::size_t i, std::size_t l) { return std::cos(0.3 * double(l) + double(i)); };
  std::vector<params> x0;
  for (std::size_t i = 0; i < n; ++i) x0.emplace_back(d);
  sp::sparse_push<params, strided> scsp(std::move(x0), sp::parse_schedule("time-varying-ring", n),
                                        sp::scsp_phases<strided>(strided{}, 0.2, compressed, final_rounds));
  const sp::gradient_oracle<double> grad = [&](std::uint32_t i, std::uint32_t, std::span<const double> x,
                                               std::span<double> g) {
    for (std::size_t l = 0; l < d; ++l) g[l] = x[l] - target(i, l);
  };
  for (std::uint32_t t = 0; t < compressed + final_rounds; ++t) scsp.round(t, grad, 0.5 / (1.0 + t / 20.0));
  // every node holds the same model after the exact rounds, and it is the optimum
  double worst = 0, spread = 0;
  const params m0 = scsp.model(0);
  for (std::size_t i = 0; i < n; ++i) {
    const params m = scsp.model(i);
    for (std::size_t l = 0; l < d; ++l) {
      double opt = 0;
      for (std::size_t j = 0; j < n; ++j) opt += target(j, l) / double(n);
      worst = std::max(worst, std::abs(m.p[l] - opt));
      spread = std::max(spread, std::abs(m.p[l] - m0.p[l]));
    }
  }
  // the messages our compressor writes are valid on the wire
  sp::message q;
  strided{}.compress(std::span<const double>(m0.p.get(), d), q, {0, 0, 1});
  const sp::message back = sp::decode(sp::encode(q));
  const bool wire_ok = back.count == d / 4 && back.indices[0] == 1 && sp::encode(back) == sp::encode(q);
  const bool ok = worst < 1e-6 && spread < 1e-9 && wire_ok;
  std::printf("scsp_user: max |x_i/u_i - optimum| = %.2e, max spread %.1e, %zu bytes: %s\n", worst, spread,
              scsp.bytes_sent(), ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}
