// Peak memory of top-1% Sparse-Push at scale against the state the algorithm cannot do without:
// x and e of every node (2 d floats) plus every node's message (k indices and k values). Builds
// n nodes of dimension d in one process (default 1024 x 1e5, the exponential graph, 2 threads),
// runs ROUNDS rounds with a local step (every node's direction a view of one shared buffer, as a
// backend that computes directions on the fly would hand them over), and prints one JSON object:
// the peak resident set (getrusage) before the nodes exist and after the rounds, the floor, their
// ratio and the time per round. Usage: scale_memory [NODES] [D] [ROUNDS] [THREADS]
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include <sparsepush/sparsepush.hpp>

namespace sp = sparsepush;

namespace {
double peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux: kilobytes
}
std::size_t arg(int argc, char** argv, int i, std::size_t def) {
  return argc > i ? static_cast<std::size_t>(std::strtoull(argv[i], nullptr, 10)) : def;
}
}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = arg(argc, argv, 1, 1024), d = arg(argc, argv, 2, 100000), rounds = arg(argc, argv, 3, 5),
                    threads = arg(argc, argv, 4, 2);
  const double before = peak_rss_bytes();
  std::vector<float> dir(d);
  for (std::size_t l = 0; l < d; ++l) dir[l] = static_cast<float>(std::sin(0.001 * double(l)));
  std::vector<std::vector<float>> x0;
  x0.reserve(n);
  for (std::size_t i = 0; i < n; ++i) x0.emplace_back(d, static_cast<float>(i % 7) * 0.1f);
  sp::sparse_push<float> alg(std::move(x0), sp::parse_schedule("exponential", n),
                             sp::sparse_push_phases(sp::top_k{sp::k_spec::fraction(0.01)}, 0.02), {.threads = threads});
  const std::vector<std::span<const float>> views(n, std::span<const float>(dir));
  const auto t0 = std::chrono::steady_clock::now();
  for (std::uint32_t t = 0; t < rounds; ++t) alg.round(t, std::span<const std::span<const float>>(views), 0.01);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double peak = peak_rss_bytes();
  const std::size_t k = alg.group().last_message(0).count;
  const double floor = static_cast<double>(n) * (2.0 * double(d) * sizeof(float) + double(k) * 8.0);
  std::printf(
      "{\"nodes\": %zu, \"d\": %zu, \"k\": %zu, \"threads\": %zu, \"rounds\": %zu, \"seconds_per_round\": %.4f, "
      "\"peak_rss_bytes\": %.0f, \"rss_before_bytes\": %.0f, \"floor_bytes\": %.0f, \"ratio\": %.3f, "
      "\"ratio_above_start\": %.3f}\n",
      n, d, k, threads, rounds, secs / double(rounds), peak, before, floor, peak / floor, (peak - before) / floor);
  return 0;
}
