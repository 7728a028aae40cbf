// one_node: embed one sparsepush node in your own training loop. Each process (here: each
// thread, or each MPI rank in one_node_mpi) owns one node of its own tensor type, computes
// gradients with its own code and calls the node's round against an endpoint. The only
// difference between the two builds is the network the endpoint comes from: a loopback shared by
// the threads (its default mode copies each message on post, so free-running threads are safe) or MPI.
// Node i minimises 0.5 ||x - b_i||^2, so the consensus optimum is mean_i b_i.
// Run: ./one_node, or mpirun -np 4 ./one_node_mpi (exit code 1 when the nodes miss the optimum)
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <sparsepush/sparsepush.hpp>
#ifdef SPARSEPUSH_EXAMPLE_MPI
#include <sparsepush/transport/mpi.hpp>
#endif

namespace sp = sparsepush;

// Your tensor type (no range interface) and the one specialization sparsepush needs.
struct weights {
  std::vector<float> w;
};
template <>
struct sparsepush::tensor_traits<weights> {
  using value_type = float;
  static float* data(weights& t) { return t.w.data(); }
  static const float* data(const weights& t) { return t.w.data(); }
  static std::size_t size(const weights& t) { return t.w.size(); }
};

constexpr std::size_t d = 1000;
constexpr std::uint32_t rounds = 300;
std::uint32_t nodes = 4;
float target(std::uint32_t id, std::size_t l) { return std::sin(0.01f * static_cast<float>(l * (id + 1))); }

// [readme-one-node-begin]
template <class Network>  // sp::loopback_network or sp::mpi_network
void run_node(std::uint32_t id, Network& net, const sp::any_schedule& sched, weights& out) {
  sp::push_sum_node<weights> node(weights{std::vector<float>(d, 0.0f)}, {.id = id, .seed = 7});
  auto ep = net.endpoint(id);                       // one node's link; MPI plugs in here
  const auto top_k = sp::parse_compressor("top-k:0.1");
  std::vector<float> xh(d), grad(d);
  for (std::uint32_t t = 0; t < rounds; ++t) {
    node.debiased(xh);                              // the model to train is x / u
    for (std::size_t l = 0; l < d; ++l) grad[l] = xh[l] - target(id, l);   // your backward pass
    const bool last = t + 20 >= rounds;             // SCSP: end with exact gossip rounds
    node.round(t, sched, last ? sp::any_compressor(sp::identity{}) : top_k, ep,
               {.eta = last ? 1.0 : 0.2, .direction = last ? std::span<const float>() : grad,
                .gamma = 0.1, .feedback = !last});
  }
  out = node.model();
}
// [readme-one-node-end]

/// The largest |x_i/u_i - optimum| over the given nodes' models.
double worst_error(const std::vector<weights>& models) {
  double worst = 0;
  for (const auto& m : models)
    for (std::size_t l = 0; l < d; ++l) {
      double opt = 0;
      for (std::uint32_t j = 0; j < nodes; ++j) opt += target(j, l) / nodes;
      worst = std::max(worst, std::abs(m.w[l] - opt));
    }
  return worst;
}

#ifndef SPARSEPUSH_EXAMPLE_MPI
int main() {
  const auto sched = sp::parse_schedule("time-varying-ring", nodes);
  sp::loopback_network net(nodes);  // default mode: safe for nodes on free-running threads
  std::vector<weights> models(nodes);
  std::vector<std::jthread> threads;
  std::vector<std::string> errors(nodes);
  for (std::uint32_t id = 0; id < nodes; ++id)
    threads.emplace_back([&, id] {
      try {
        run_node(id, net, sched, models[id]);
      } catch (const sp::error& e) {
        errors[id] = e.what();
      }
    });
  threads.clear();  // join
  for (const auto& e : errors)
    if (!e.empty()) return std::fprintf(stderr, "one_node: %s\n", e.c_str()), 2;
  const double worst = worst_error(models);
  std::printf("%u nodes, %u rounds: max |x_i/u_i - optimum| = %.2e, %zu bytes sent\n", nodes, rounds, worst,
              net.total_bytes());
  return worst < 1e-2 ? 0 : 1;
}
#else
int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  nodes = static_cast<std::uint32_t>(size);  // one node a rank
  int rc = 0;
  try {
    const auto sched = sp::parse_schedule("time-varying-ring", nodes);
    sp::mpi_network net(MPI_COMM_WORLD, nodes);
    weights mine;
    run_node(static_cast<std::uint32_t>(rank), net, sched, mine);
    net.finish();
    double err = worst_error({mine}), worst = 0;
    unsigned long long bytes = net.total_bytes(), total = 0;
    MPI_Reduce(&err, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&bytes, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("%u nodes on %d ranks, %u rounds: max |x_i/u_i - optimum| = %.2e, %llu bytes sent\n", nodes, size,
                  rounds, worst, total);
      rc = worst < 1e-2 ? 0 : 1;
    }
  } catch (const sp::error& e) {
    std::fprintf(stderr, "one_node: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return rc;
}
#endif
