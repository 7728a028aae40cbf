// readme_embed: the README's C++ example. Your training loop owns the model and the gradients;
// sparsepush owns one push-sum node per worker (here a thread; under MPI a rank) and runs its
// gossip round: local step, top-K compression with error feedback, push, mix. SCSP's last rounds
// are exact, so every node ends with the same model.
// Node i holds a least-squares term f_i(x) = 0.5 ||a * x - b_i||^2 (elementwise product) with its
// own targets b_i, so the optimum of sum_i f_i is known in closed form: x*_l = mean_i b_il / a_l.
// On this graph every u_i stays 1 and push-sum conserves the sum of the models, so the nodes'
// mean follows gradient descent on sum_i f_i however far apart compression leaves the nodes, and
// the exact final rounds bring every node to that mean.
// Run: ./readme_embed (exit code 1 when the nodes disagree or miss the optimum)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <span>
#include <thread>
#include <vector>
#include <sparsepush/sparsepush.hpp>

namespace sp = sparsepush;

constexpr std::uint32_t n = 8, rounds = 300, final_rounds = 4;
constexpr std::size_t d = 1000;
constexpr double lr = 0.2;
float a(std::size_t l) { return 1.0f + 0.5f * std::sin(0.3f * static_cast<float>(l)); }
float b(std::uint32_t i, std::size_t l) { return std::cos(0.01f * static_cast<float>(l * (i + 1))); }

/// Whether every node's model is within 1e-3 of the optimum of sum_i f_i (and how far it is).
bool at_optimum(const std::vector<std::vector<float>>& models) {
  double worst = 0;
  for (std::size_t l = 0; l < d; ++l) {
    double mean_b = 0;
    for (std::uint32_t i = 0; i < n; ++i) mean_b += static_cast<double>(b(i, l)) / n;
    for (const auto& m : models) worst = std::max(worst, std::abs(m[l] - mean_b / a(l)));
  }
  std::printf("%u nodes, %u rounds: max |x_i/u_i - optimum| = %.2e\n", n, rounds, worst);
  return worst < 1e-3;
}

// [readme-embed-begin]
void train_node(std::uint32_t i, sp::loopback_network& net, const sp::any_schedule& graph,
                std::vector<float>& out) {
  sp::push_sum_node<std::vector<float>> node(std::vector<float>(d, 0.0f), {.id = i, .seed = 1});
  auto link = net.endpoint(i);                      // sp::mpi_network: one node per rank
  const auto top_k = sp::parse_compressor("top-k:0.1");
  std::vector<float> model(d), grad(d);
  for (std::uint32_t t = 0; t < rounds; ++t) {
    node.debiased(model);                           // the model to train: x_i / u_i
    for (std::size_t l = 0; l < d; ++l)             // your backward pass
      grad[l] = a(l) * (a(l) * model[l] - b(i, l));
    const bool exact = t + final_rounds >= rounds;  // SCSP: end with exact gossip rounds
    node.round(t, graph, exact ? sp::any_compressor(sp::identity{}) : top_k, link,
               {.eta = exact ? 1.0 : 0.2, .direction = exact ? std::span<const float>() : grad,
                .gamma = lr, .feedback = !exact});  // step, compress, push, mix
  }
  out = node.model();
}

int main() {
  const auto graph = sp::parse_schedule("time-varying-ring", n);
  sp::loopback_network net(n);                      // in process, one thread per node
  std::vector<std::vector<float>> models(n);
  {
    std::vector<std::jthread> threads;
    for (std::uint32_t i = 0; i < n; ++i)
      threads.emplace_back(train_node, i, std::ref(net), std::cref(graph), std::ref(models[i]));
  }                                                 // joined here
  return at_optimum(models) ? 0 : 1;                // every node at the minimum of sum_i f_i?
}
// [readme-embed-end]
