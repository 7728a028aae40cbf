// free_running: one_node's pattern under ThreadSanitizer. One free-running thread per node, each
// running push_sum_node::round (compress, post, collect, mix) against a shared loopback_network in
// the mode named on the command line (default: the loopback's default mode), with top-K messages
// that the sender rewrites every round while its receivers may still be mixing the previous one.
// ctest builds it with -fsanitize=thread and fails on any "WARNING: ThreadSanitizer" in its output.
// Usage: free_running [default|copied|encoded|by_reference]
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <sparsepush/compress/identity.hpp>
#include <sparsepush/compress/top_k.hpp>
#include <sparsepush/gossip/node.hpp>
#include <sparsepush/topology/parse.hpp>
#include <sparsepush/transport/loopback.hpp>

namespace sp = sparsepush;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "default";
  sp::loopback_options opt{.drop_probability = 0.1, .seed = 3, .trace = true};
  if (mode == "copied") opt.mode = sp::loopback_mode::copied;
  else if (mode == "encoded") opt.mode = sp::loopback_mode::encoded;
  else if (mode == "by_reference") opt.mode = sp::loopback_mode::by_reference;
  else if (mode != "default") return std::fprintf(stderr, "usage: free_running [default|copied|encoded|by_reference]\n"), 2;

  constexpr std::uint32_t nodes = 4, rounds = 60;
  constexpr std::size_t d = 400;
  const auto sched = sp::parse_schedule("time-varying-ring", nodes);
  sp::loopback_network net(nodes, opt);
  std::vector<std::string> errors(nodes);
  std::vector<double> u(nodes);
  {
    std::vector<std::jthread> threads;
    for (std::uint32_t id = 0; id < nodes; ++id)
      threads.emplace_back([&, id] {
        try {
          std::vector<float> x0(d);
          for (std::size_t l = 0; l < d; ++l) x0[l] = static_cast<float>((l * (id + 3)) % 17) - 8.0f;
          sp::push_sum_node<std::vector<float>> node(std::move(x0),
                                                     {.id = id, .seed = 7, .recovery = sp::loss_recovery::acknowledged});
          auto ep = net.endpoint(id);
          const sp::top_k top{sp::k_spec::fraction(0.1)};
          std::vector<float> grad(d);
          for (std::uint32_t t = 0; t < rounds; ++t) {
            for (std::size_t l = 0; l < d; ++l) grad[l] = 0.01f * static_cast<float>((l + t + id) % 7);
            if (t % 3 == 2) node.round(t, sched, sp::identity{}, ep, {.eta = 1.0});
            else node.round(t, sched, top, ep, {.eta = 0.3, .direction = grad, .gamma = 0.05});
          }
          u[id] = node.u();
        } catch (const sp::error& e) {
          errors[id] = e.what();
        }
      });
  }
  for (std::uint32_t id = 0; id < nodes; ++id)
    if (!errors[id].empty()) return std::fprintf(stderr, "free_running: node %u: %s\n", id, errors[id].c_str()), 1;
  double sum_u = 0;
  for (const double v : u) sum_u += v;
  std::printf("free_running (%s): %u nodes, %u rounds, %zu bytes, %zu envelopes lost, sum u = %.12f: done\n",
              mode.c_str(), nodes, rounds, net.total_bytes(), net.messages_dropped(), sum_u);
  return 0;
}
