// least_squares: distributed least squares, node i holding its own rows (A_i, b_i), solved by
// every algorithm of the library; prints the final relative error of the averaged model against
// the normal-equations optimum, the parameter divergence, bytes sent and the communication ratio,
// then the per-node state bytes of SGP, SP and CHOCO at a large d.
// Run: ./least_squares [--nodes 16] [--rounds 3000] [--heterogeneity 0.1] [--memory-dim 1000000]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sparsepush/sparsepush.hpp>
#include <string>
#include <vector>

namespace sp = sparsepush;

namespace {
/// Node i: A_i (m x d, Gaussian), b_i = A_i (1 + het z_i) + 0.1 noise; f_i = ||A_i x - b_i||^2 / 2m.
struct problem {
  std::size_t n, d, m;
  std::vector<std::vector<double>> a, b;  // row-major A_i
  std::vector<double> optimum;

  problem(std::size_t n_, std::size_t d_, std::size_t m_, double het) : n(n_), d(d_), m(m_), a(n_), b(n_) {
    std::mt19937_64 gen(7);
    std::normal_distribution<double> nd;
    std::vector<double> h(d * d, 0.0), r(d, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      a[i].resize(m * d);
      for (auto& v : a[i]) v = nd(gen);
      std::vector<double> xi(d);
      for (auto& v : xi) v = 1.0 + het * nd(gen);
      b[i].resize(m);
      for (std::size_t k = 0; k < m; ++k) {
        double s = 0.1 * nd(gen);
        for (std::size_t c = 0; c < d; ++c) s += a[i][k * d + c] * xi[c];
        b[i][k] = s;
        for (std::size_t c = 0; c < d; ++c) {
          r[c] += a[i][k * d + c] * s;
          for (std::size_t e = 0; e < d; ++e) h[c * d + e] += a[i][k * d + c] * a[i][k * d + e];
        }
      }
    }
    optimum = solve(h, r);
  }
  /// Gaussian elimination with partial pivoting (H is symmetric positive definite here).
  std::vector<double> solve(std::vector<double> h, std::vector<double> r) const {
    for (std::size_t c = 0; c < d; ++c) {
      std::size_t p = c;
      for (std::size_t k = c + 1; k < d; ++k)
        if (std::abs(h[k * d + c]) > std::abs(h[p * d + c])) p = k;
      for (std::size_t e = 0; e < d; ++e) std::swap(h[c * d + e], h[p * d + e]);
      std::swap(r[c], r[p]);
      for (std::size_t k = c + 1; k < d; ++k) {
        const double f = h[k * d + c] / h[c * d + c];
        for (std::size_t e = c; e < d; ++e) h[k * d + e] -= f * h[c * d + e];
        r[k] -= f * r[c];
      }
    }
    std::vector<double> x(d);
    for (std::size_t c = d; c-- > 0;) {
      double s = r[c];
      for (std::size_t e = c + 1; e < d; ++e) s -= h[c * d + e] * x[e];
      x[c] = s / h[c * d + c];
    }
    return x;
  }
  sp::gradient_oracle<double> oracle() const {
    return [this](std::uint32_t i, std::uint32_t, std::span<const double> x, std::span<double> g) {
      for (std::size_t k = 0; k < m; ++k) {
        double res = -b[i][k];
        for (std::size_t c = 0; c < d; ++c) res += a[i][k * d + c] * x[c];
        for (std::size_t c = 0; c < d; ++c) g[c] += a[i][k * d + c] * res / static_cast<double>(m);
      }
    };
  }
  template <class A>
  double error(const A& alg) const {
    std::vector<double> avg(d, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const auto mdl = alg.model(i);
      for (std::size_t c = 0; c < d; ++c) avg[c] += mdl[c] / static_cast<double>(n);
    }
    double num = 0, den = 0;
    for (std::size_t c = 0; c < d; ++c) {
      num += (avg[c] - optimum[c]) * (avg[c] - optimum[c]);
      den += optimum[c] * optimum[c];
    }
    return std::sqrt(num / den);
  }
};

std::size_t arg(int argc, char** argv, const char* key, std::size_t def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == key) return std::strtoull(argv[i + 1], nullptr, 10);
  return def;
}
double arg_real(int argc, char** argv, const char* key, double def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == key) return std::strtod(argv[i + 1], nullptr);
  return def;
}
}  // namespace

double learning_rate(std::uint32_t t) { return 0.2 / (1.0 + t / 50.0); }

// One SCSP run with progress reports, as a user would write it.
void scsp_with_reports(const std::vector<std::vector<double>>& x0, const sp::gradient_oracle<double>& f,
                       std::uint32_t rounds, std::uint32_t final_rounds) {
  const std::size_t n = x0.size();
  auto lr = learning_rate;
  // [readme-train-begin]
  const auto schedule = sp::parse_schedule("exponential", n);       // SGP's one-peer graph
  const auto phases = sp::scsp_phases(sp::parse_compressor("top-k:0.01"), /*eta*/ 0.01,
                                      rounds, final_rounds);          // then uncompressed gossip
  sp::sparse_push<double> scsp(x0, schedule, phases, {.threads = 2});
  for (std::uint32_t t = 0; t < rounds + final_rounds; ++t) {
    scsp.round(t, f, lr(t));
    if ((t + 1) % 1000 == 0 || t + 1 == rounds + final_rounds) {  // every 1000 rounds and the last
      const sp::round_report r = sp::report<double>(scsp, t);
      std::printf("round %5u: divergence %.2e, %.2f MB sent, %.1fx less than fp32\n", r.round + 1,
                  r.parameter_divergence, static_cast<double>(r.bytes_sent) / 1e6, r.comm_ratio);
    }
  }
  // [readme-train-end]
}

// Every algorithm on the same problem: the averaged model's error, divergence and bytes.
void comparison_table(const problem& pb, const std::vector<std::vector<double>>& x0, double het, std::uint32_t rounds,
                      std::uint32_t final_rounds) {
  const std::size_t n = x0.size(), d = pb.d;
  const auto f = pb.oracle();
  const auto expo = sp::parse_schedule("exponential", n);
  const auto ring = sp::parse_schedule("undirected-ring", n);
  auto lr = learning_rate;
  std::printf("\ndistributed least squares: %zu nodes, d = %zu (double: identity sends fp64, ratio 0.5 vs fp32), 100 rows each, heterogeneity %g, %u rounds\n\n",
              n, d, het, rounds);
  std::printf("| algorithm | schedule | rel. error of averaged model | parameter divergence | MB sent | comm ratio |\n");
  std::printf("|---|---|---|---|---|---|\n");
  auto row = [&](const char* name, const char* sched, auto&& alg, std::uint32_t r) {
    for (std::uint32_t t = 0; t < r; ++t) alg.round(t, f, lr(t));
    const auto rep = sp::report<double>(alg, r - 1);
    std::printf("| %s | %s | %.2e | %.2e | %.3f | %.1f |\n", name, sched, pb.error(alg), rep.parameter_divergence,
                static_cast<double>(rep.bytes_sent) / 1e6, rep.comm_ratio);
  };
  row("centralized (all-reduce)", "-", sp::centralized<double>(x0[0], n), rounds);
  row("SGP", "exponential", sp::sparse_push<double>(x0, expo, sp::sgp_phases()), rounds);
  row("D-PSGD", "undirected-ring", sp::sparse_push<double>(x0, ring, sp::sgp_phases()), rounds);
  row("DeepSqueeze top-10%, eta 0.1", "undirected-ring",
      sp::sparse_push<double>(x0, ring, sp::sparse_push_phases(sp::parse_compressor("top-k:0.1"), 0.1)), rounds);
  row("CHOCO top-10%, gamma_c 0.3", "undirected-ring",
      sp::choco<double>(x0, ring, {.consensus_step = 0.3, .compressor = sp::parse_compressor("top-k:0.1")}), rounds);
  row("CHOCO sign, gamma_c 0.3", "undirected-ring",
      sp::choco<double>(x0, ring, {.consensus_step = 0.3, .compressor = sp::parse_compressor("sign")}), rounds);
  for (const auto& [spec, eta] : {std::pair{"top-k:0.01", 0.01}, std::pair{"top-k:0.1", 0.05},
                                  std::pair{"qsgd:16", 0.1}, std::pair{"sign", 0.05}}) {
    const std::string sp_name = std::string("SP ") + spec + ", eta " + std::to_string(eta).substr(0, 4);
    row(sp_name.c_str(), "exponential",
        sp::sparse_push<double>(x0, expo, sp::sparse_push_phases(sp::parse_compressor(spec), eta)), rounds);
    const std::string scsp_name = std::string("SCSP ") + spec + " + " + std::to_string(final_rounds) + " final";
    row(scsp_name.c_str(), "exponential",
        sp::sparse_push<double>(x0, expo, sp::scsp_phases(sp::parse_compressor(spec), eta, rounds, final_rounds)),
        rounds + final_rounds);
  }
}

// Per-node state after one round at a large d: the algorithm's tensors and the buffers a node reuses.
void memory_table(std::size_t mem_d) {
  // fp32 models, top-1%, zero gradients: the
  // algorithm's tensors (x, residual or copies, u) and the buffers a node reuses every round
  // (its message, inbox and scratch: the mixing block, its share of the compressor workspaces
  // the group lends, one per thread).
  std::printf("\nper-node state at d = %zu (float), after one round\n\n", mem_d);
  std::printf("| algorithm | model state bytes | buffer bytes | total | total in units of 4d |\n|---|---|---|---|---|\n");
  const std::size_t mn = 4;
  std::vector<std::vector<float>> big(mn, std::vector<float>(mem_d));
  for (std::size_t i = 0; i < mn; ++i)
    for (std::size_t l = 0; l < mem_d; ++l) big[i][l] = std::sin(0.37f * static_cast<float>(l + 1) * static_cast<float>(i + 1));
  sp::gradient_oracle<float> zero = [](std::uint32_t, std::uint32_t, std::span<const float>, std::span<float>) {};
  auto mem_row = [&](const char* name, auto&& alg, auto&& node) {
    alg.round(0, zero, 0.1);
    std::printf("| %s | %zu | %zu | %zu | %.2f |\n", name, node(alg).model_bytes(),
                alg.state_bytes(0) - node(alg).model_bytes(), alg.state_bytes(0), static_cast<double>(alg.state_bytes(0)) / (4.0 * static_cast<double>(mem_d)));
  };
  auto sp_node = [](const auto& a) -> const auto& { return a.group().node(0); };
  auto choco_node = [](const auto& a) -> const auto& { return a.node(0); };
  const auto mring = sp::parse_schedule("undirected-ring", mn);
  mem_row("SGP", sp::sparse_push<float>(big, mring, sp::sgp_phases()), sp_node);
  mem_row("SP top-1%", sp::sparse_push<float>(big, mring, sp::sparse_push_phases(sp::parse_compressor("top-k:0.01"), 0.01)),
          sp_node);
  mem_row("CHOCO top-1% (x, xp, s)", sp::choco<float>(big, mring, {.compressor = sp::parse_compressor("top-k:0.01")}),
          choco_node);
  mem_row("CHOCO top-1% (one copy per neighbour, ring: 2)",
          sp::choco<float>(big, mring, {.compressor = sp::parse_compressor("top-k:0.01"), .form = sp::choco_form::per_neighbour}),
          choco_node);
}

int main(int argc, char** argv) {
  const std::size_t n = arg(argc, argv, "--nodes", 16);
  const auto rounds = static_cast<std::uint32_t>(arg(argc, argv, "--rounds", 3000));
  const double het = arg_real(argc, argv, "--heterogeneity", 0.1);
  const std::size_t mem_d = arg(argc, argv, "--memory-dim", 1000000);
  if (n < 2 || rounds < 2) {
    std::fprintf(stderr, "least_squares: need --nodes >= 2 and --rounds >= 2\n");
    return 2;
  }
  const std::size_t d = 100;
  const problem pb(n, d, 100, het);
  const std::vector<std::vector<double>> x0(n, std::vector<double>(d, 0.0));
  const std::uint32_t final_rounds = 40;
  scsp_with_reports(x0, pb.oracle(), rounds, final_rounds);
  comparison_table(pb, x0, het, rounds, final_rounds);
  memory_table(mem_d);
  return 0;
}
