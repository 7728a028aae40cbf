// lossy_resume: Sparse-Push on a least-squares problem over a network that loses 30% of its
// envelopes, with acknowledged recovery; the local directions come from the nodes' own momentum
// buffers; halfway through, the run is checkpointed to a file, restored into a fresh algorithm,
// and finished there. Prints the average's distance to the optimum and whether the restored run
// matches the uninterrupted one bit for bit (exit code 1 if not).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <vector>
#include <sparsepush/sparsepush.hpp>

namespace sp = sparsepush;

namespace {
constexpr std::size_t n = 16, d = 1000;
constexpr std::uint32_t rounds = 400;
constexpr double lr = 0.05, momentum = 0.5;

/// Node i's least-squares target b_i: f_i(x) = |x - b_i|^2 / 2, optimum of the sum = mean of b_i.
double target(std::size_t i, std::size_t l) { return std::sin(0.37 * double(l + 1) * double(i + 1)); }

struct backend {
  std::vector<std::vector<double>> velocity = std::vector<std::vector<double>>(n, std::vector<double>(d, 0.0));
  std::vector<std::vector<double>> xh;  // one per thread
  std::vector<std::span<const double>> views;

  /// p_i = momentum v_i + grad f_i(xh_i), written into v_i itself.
  void my_direction(std::size_t i, std::span<const double> x, std::vector<double>& v) const {
    for (std::size_t l = 0; l < d; ++l) v[l] = momentum * v[l] + (x[l] - target(i, l));
  }

  void round(sp::sparse_push<double>& alg, std::uint32_t t) {
    xh.resize(alg.workers(), std::vector<double>(d));
    views.assign(velocity.begin(), velocity.end());
    const auto views_of_velocity = views;
    // [readme-directions-begin]
    if (alg.trains(t)) {  // the phase takes a local step
      alg.for_each_node([&](std::size_t i, std::size_t w) {  // w: the thread, for its scratch
        alg.model(i, xh[w]);                                    // xh_i = x_i / u_i
        my_direction(i, xh[w], velocity[i]);                    // p_i into the node's own buffer
      });
    }
    alg.round(t, std::span<const std::span<const double>>(views_of_velocity), lr);
    // [readme-directions-end]
  }
};

const sp::sparse_push_options lossy{.network = {.drop_probability = 0.3, .seed = 7},
                                   .recovery = sp::loss_recovery::acknowledged};
}  // namespace

int main() {
  const auto phases = sp::scsp_phases(sp::parse_compressor("top-k:0.05"), 0.1, rounds - 20, 20);
  const std::vector<std::vector<double>> x0(n, std::vector<double>(d, 0.0));
  const auto sched = sp::parse_schedule("exponential", n);
  // [readme-loss-begin]
  sp::sparse_push<double> alg(x0, sched, phases,
                              {.network = {.drop_probability = 0.3, .seed = 7},
                               .recovery = sp::loss_recovery::acknowledged});
  // [readme-loss-end]
  auto& full = alg;
  sp::sparse_push<double> part(x0, sched, phases, lossy), resumed(x0, sched, phases, lossy);
  backend bf, bp;
  for (std::uint32_t t = 0; t < rounds; ++t) bf.round(full, t);

  const std::string file = (std::filesystem::temp_directory_path() / "sparsepush-lossy-resume.ckpt").string();
  for (std::uint32_t t = 0; t < rounds / 2; ++t) bp.round(part, t);
  {
    auto& alg = part;  // NOLINT: the name docs/guide/checkpoints.md uses
    // [readme-save-begin]
    sp::checkpoint_writer w;
    alg.save(w);                         // sparse_push, choco, centralized; push_sum_node::save too
    sp::write_file_atomic(file, w.finish());
    // [readme-save-end]
  }
  std::vector<std::vector<double>> saved_velocity = bp.velocity;  // the backend keeps its own state

  {
    auto& alg = resumed;  // NOLINT: the name docs/guide/checkpoints.md uses
    // [readme-restore-begin]
    const auto bytes = sp::read_file_bytes(file);
    sp::checkpoint_reader r(bytes, file);  // checks magic, version, length, CRC
    alg.restore(r);                      // every node and the byte ledger, or nothing
    r.done();
    // [readme-restore-end]
  }
  std::filesystem::remove(file);
  backend br;
  br.velocity = saved_velocity;
  for (std::uint32_t t = rounds / 2; t < rounds; ++t) br.round(resumed, t);

  // [readme-loss-report-begin]
  std::printf("%zu of %zu envelopes lost; sum of u = %.12f (n = %zu)\n", alg.messages_dropped(),
              alg.messages_sent(), alg.weight_mass(), n);
  // [readme-loss-report-end]
  double err = 0;
  const auto avg = full.group().average_model();
  for (std::size_t l = 0; l < d; ++l) {
    double opt = 0;
    for (std::size_t i = 0; i < n; ++i) opt += target(i, l) / double(n);
    err = std::max(err, std::abs(avg[l] - opt));
  }
  std::printf("max |average model - optimum| = %.3g after %u rounds\n", err, rounds);
  bool same = resumed.bytes_sent() == full.bytes_sent() && resumed.messages_dropped() == full.messages_dropped();
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = full.model(i), b = resumed.model(i);
    same = same && std::memcmp(a.data(), b.data(), d * sizeof(double)) == 0;
  }
  std::printf("checkpointed at round %u, restored and finished: %s\n", rounds / 2,
              same ? "bit-identical to the uninterrupted run" : "DIFFERS from the uninterrupted run");
  return same && std::abs(full.weight_mass() - double(n)) < 1e-9 ? 0 : 1;
}
