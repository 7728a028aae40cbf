// gossip_average: n nodes holding random vectors average them by push-sum gossip over a chosen
// schedule, pushing messages compressed by a chosen compressor (with error feedback), through the
// in-process transport. Prints, per round, the consensus error max_i |x_i/u_i - average|_inf, the
// parameter divergence and the bytes sent so far.
// Run: ./gossip_average [--nodes 16] [--schedule exponential] [--compressor identity]
//                       [--eta 1] [--rounds 50] [--dim 10000] [--seed 1] [--threads 2] [--every 5]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sparsepush/sparsepush.hpp>
#include <string>
#include <vector>

namespace {
struct options {
  std::size_t nodes = 16, rounds = 50, dim = 10000, threads = 2, every = 5;
  std::string schedule = "exponential", compressor = "identity";
  double eta = 1.0;
  std::uint64_t seed = 1;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "gossip_average: %s\nusage: gossip_average [--nodes N] [--schedule SPEC] "
               "[--compressor SPEC] [--eta E] [--rounds R] [--dim D] [--seed S] [--threads T] "
               "[--every K]\n",
               why.c_str());
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int a = 1; a < argc; a += 2) {
    const std::string key = argv[a];
    if (a + 1 >= argc) usage("missing value for " + key);
    const std::string val = argv[a + 1];
    auto count = [&]() -> std::size_t {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(val.c_str(), &end, 10);
      if (val.empty() || *end != '\0' || val[0] == '-') usage(key + " needs a whole number, got '" + val + "'");
      return static_cast<std::size_t>(v);
    };
    if (key == "--nodes") o.nodes = count();
    else if (key == "--rounds") o.rounds = count();
    else if (key == "--dim") o.dim = count();
    else if (key == "--threads") o.threads = count();
    else if (key == "--every") o.every = std::max<std::size_t>(1, count());
    else if (key == "--seed") o.seed = count();
    else if (key == "--schedule") o.schedule = val;
    else if (key == "--compressor") o.compressor = val;
    else if (key == "--eta") {
      char* end = nullptr;
      o.eta = std::strtod(val.c_str(), &end);
      if (val.empty() || *end != '\0') usage("--eta needs a number, got '" + val + "'");
    } else {
      usage("unknown option " + key);
    }
  }
  if (o.nodes < 2) usage("--nodes must be at least 2");
  if (o.dim < 1) usage("--dim must be at least 1");
  return o;
}
}  // namespace

int main(int argc, char** argv) {
  namespace sp = sparsepush;
  const options o = parse(argc, argv);
  try {
    std::mt19937_64 gen(o.seed);
    std::normal_distribution<double> normal;
    std::vector<std::vector<double>> x0(o.nodes, std::vector<double>(o.dim));
    std::vector<double> avg(o.dim, 0.0);
    for (std::size_t i = 0; i < o.nodes; ++i)
      for (std::size_t l = 0; l < o.dim; ++l) {
        x0[i][l] = normal(gen) + static_cast<double>(i);  // node-dependent offsets: far from consensus
        avg[l] += x0[i][l] / static_cast<double>(o.nodes);
      }
    std::printf("%zu nodes, schedule %s, compressor %s, eta %g, d = %zu (double)\n", o.nodes,
                o.schedule.c_str(), o.compressor.c_str(), o.eta, o.dim);
    std::printf("%6s %14s %14s %14s %14s\n", "round", "max |xh - avg|", "divergence", "MB sent",
                "ratio vs fp32");
    auto report = [&](const sp::push_sum_group<std::vector<double>>& group,
                      const sp::loopback_network& net, std::uint32_t t) {
      double err = 0;
      for (std::size_t i = 0; i < o.nodes; ++i) {
        const auto xh = group.debiased(i);
        for (std::size_t l = 0; l < o.dim; ++l) err = std::max(err, std::abs(xh[l] - avg[l]));
      }
      const double full = 4.0 * static_cast<double>(o.dim) * static_cast<double>(net.total_messages());
      std::printf("%6u %14.3e %14.3e %14.3f %14.1f\n", t + 1, err, group.consensus_distance(),
                  static_cast<double>(net.total_bytes()) / 1e6, full / static_cast<double>(net.total_bytes()));
    };

    // [readme-gossip-begin]
    const auto schedule = sp::parse_schedule(o.schedule, o.nodes, o.seed);  // validated
    const auto compressor = sp::parse_compressor(o.compressor);
    sp::push_sum_group<std::vector<double>> group(std::move(x0), {.eta = o.eta, .threads = o.threads, .seed = o.seed});
    sp::loopback_network net(o.nodes);                   // byte ledger, optional message loss
    for (std::uint32_t t = 0; t < o.rounds; ++t) {
      group.round(schedule, compressor, net, t);         // compress, push, mix
      if ((t + 1) % o.every == 0 || t + 1 == o.rounds) report(group, net, t);
    }
    // [readme-gossip-end]
  } catch (const sp::error& e) {
    std::fprintf(stderr, "gossip_average: %s\n", e.what());
    return 2;
  }
  return 0;
}
