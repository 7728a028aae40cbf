// bench_mpi: one Sparse-Push round (no-op local step, compress with error feedback, push, mix) at
// 16 nodes, in one process and on MPI ranks, for d in {1e5, 1e6} and top-1% / identity. A timing
// harness, not Google Benchmark (which does not run under mpirun); bench/mpi_ratio.sh runs both
// modes back to back and prints the ratios.
//   bench_mpi inprocess THREADS     all 16 nodes in this process, THREADS worker threads
//   mpirun -np R bench_mpi mpi      16 nodes in blocks over R ranks (one thread each)
// Prints one JSON object a line: mode, d, compressor, ms per round (median of 5 repetitions), and
// for MPI where the time went per round on the slowest rank: encode (frames + MPI_Isend),
// wait (envelopes not yet there), receive (MPI_Mrecv copies), decode (validation, CRC).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <sparsepush/sparsepush.hpp>
#ifdef SPARSEPUSH_HAS_MPI
#include <sparsepush/transport/mpi.hpp>
#endif

namespace sp = sparsepush;

namespace {
constexpr std::size_t nodes = 16;
constexpr std::uint32_t warm = 3, rounds = 20, reps = 5;

std::vector<float> model(std::uint32_t i, std::size_t d) {
  std::vector<float> x(d);
  for (std::size_t l = 0; l < d; ++l) x[l] = std::sin(0.37f * static_cast<float>(l + 1) * static_cast<float>(i + 1));
  return x;
}

const sp::gradient_oracle<float> no_op = [](std::uint32_t, std::uint32_t, std::span<const float>, std::span<float>) {};

sp::phase_schedule phases(const std::string& comp) {
  return comp == "identity" ? sp::sgp_phases() : sp::sparse_push_phases(sp::parse_compressor(comp), 0.02);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Alg>
double time_rounds(Alg& alg, std::uint32_t& t, auto&& sync) {
  for (std::uint32_t k = 0; k < warm; ++k) alg.round(t++, no_op, 0.01);
  std::vector<double> ms;
  for (std::uint32_t r = 0; r < reps; ++r) {
    sync();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::uint32_t k = 0; k < rounds; ++k) alg.round(t++, no_op, 0.01);
    sync();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / rounds);
  }
  return median(ms);
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const std::vector<std::size_t> dims{100000, 1000000};
  const std::vector<std::string> comps{"top-k:0.01", "identity"};
  if (mode == "inprocess") {
    const std::size_t threads = argc > 2 ? std::stoul(argv[2]) : 1;
    for (std::size_t d : dims)
      for (const auto& c : comps) {
        std::vector<std::vector<float>> x0;
        for (std::uint32_t i = 0; i < nodes; ++i) x0.push_back(model(i, d));
        sp::sparse_push<float> alg(x0, sp::parse_schedule("exponential", nodes), phases(c), {.threads = threads});
        std::uint32_t t = 0;
        const double ms = time_rounds(alg, t, [] {});
        std::printf("{\"mode\": \"inprocess\", \"threads\": %zu, \"d\": %zu, \"compressor\": \"%s\", \"ms_per_round\": %.3f}\n",
                    threads, d, c.c_str(), ms);
      }
    return 0;
  }
#ifdef SPARSEPUSH_HAS_MPI
  if (mode == "mpi") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (std::size_t d : dims)
      for (const auto& c : comps) {
        sp::mpi_network net(MPI_COMM_WORLD, nodes);
        std::vector<std::vector<float>> x0;
        for (std::uint32_t i = 0; i < net.local_nodes(); ++i) x0.push_back(model(net.first_node() + i, d));
        sp::sparse_push<float, sp::any_compressor, sp::any_schedule, sp::mpi_network> alg(
            x0, sp::parse_schedule("exponential", nodes), phases(c), net);
        std::uint32_t t = 0;
        for (std::uint32_t k = 0; k < warm; ++k) alg.round(t++, no_op, 0.01);
        net.reset_timing();
        const double ms = time_rounds(alg, t, [] { MPI_Barrier(MPI_COMM_WORLD); });
        net.finish();
        const auto& tm = net.timing();
        const double per = 1000.0 / (warm + rounds * reps);  // the timing covers time_rounds' warm-up too
        double mine[4] = {tm.encode * per, tm.wait * per, tm.receive * per, tm.decode * per}, worst[4];
        MPI_Reduce(mine, worst, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (rank == 0)
          std::printf("{\"mode\": \"mpi\", \"ranks\": %d, \"d\": %zu, \"compressor\": \"%s\", \"ms_per_round\": %.3f, "
                      "\"encode_ms\": %.3f, \"wait_ms\": %.3f, \"receive_ms\": %.3f, \"decode_ms\": %.3f}\n",
                      size, d, c.c_str(), ms, worst[0], worst[1], worst[2], worst[3]);
        std::fflush(stdout);
      }
    MPI_Finalize();
    return 0;
  }
#endif
  std::fprintf(stderr, "usage: bench_mpi inprocess THREADS | mpirun -np R bench_mpi mpi\n");
  return 2;
}
