// one_node: embed one sparsepush node in your own training loop. Each thread here plays one
// process: it owns one node (of its own tensor type), computes gradients with its own code and
// calls the node's round against an endpoint. The endpoint is a loopback shared by the threads
// (in encoded mode: every envelope goes through the wire format, as over a network).
// Node i minimises 0.5 ||x - b_i||^2, so the consensus optimum is mean_i b_i.
// Run: ./one_node   (exit code 1 when the nodes do not reach the optimum)
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>
#include <sparsepush/sparsepush.hpp>

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
constexpr std::uint32_t nodes = 4, rounds = 300;
float target(std::uint32_t id, std::size_t l) { return std::sin(0.01f * static_cast<float>(l * (id + 1))); }

// [readme-one-node-begin]
void run_node(std::uint32_t id, sp::loopback_network& net, const sp::any_schedule& sched, weights& out) {
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

int main() {
  const auto sched = sp::parse_schedule("time-varying-ring", nodes);
  sp::loopback_network net(nodes, {.mode = sp::loopback_mode::encoded});
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
  double worst = 0;
  for (std::uint32_t id = 0; id < nodes; ++id)
    for (std::size_t l = 0; l < d; ++l) {
      double opt = 0;
      for (std::uint32_t j = 0; j < nodes; ++j) opt += target(j, l) / nodes;
      worst = std::max(worst, std::abs(models[id].w[l] - opt));
    }
  std::printf("%u nodes, %u rounds: max |x_i/u_i - optimum| = %.2e, %zu bytes sent\n", nodes, rounds,
              worst, net.total_bytes());
  return worst < 1e-2 ? 0 : 1;
}
