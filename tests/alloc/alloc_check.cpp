// A round allocates nothing in steady state: SP (top-K, with and without int8 values), SCSP (its
// compressed rounds and its exact final rounds), SGP and CHOCO-SGD, in one process over the
// loopback (by reference, copied and encoded) and on 1 and 2 threads. Each run warms up for 8 rounds (4 in the
// second phase of SCSP) (buffers grow to their working size), then counts every C++ allocation of the
// next rounds with a counting global operator new. Prints one line per run and exits 1 if any
// round allocated. (The same check over MPI is `mpi_check alloc`.)
#include <cstdio>
#include <string>
#include <sparsepush/sparsepush.hpp>

#include "counting_new.hpp"

namespace sp = sparsepush;

namespace {
constexpr std::size_t n = 8, d = 5000;

std::vector<std::vector<float>> initial() {
  std::vector<std::vector<float>> x0(n, std::vector<float>(d));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < d; ++l) x0[i][l] = static_cast<float>(std::sin(0.37 * double(l + 1) * double(i + 1)));
  return x0;
}

// a quadratic pull towards per-node targets: p = x - c_i
const sp::gradient_oracle<float> oracle = [](std::uint32_t i, std::uint32_t t, std::span<const float> x,
                                             std::span<float> p) {
  for (std::size_t l = 0; l < x.size(); ++l)
    p[l] = x[l] - static_cast<float>(std::cos(0.01 * double(l) * double(i + 1) + 0.001 * t));
};

int failures = 0;

/// Rounds [from, to) of alg must allocate nothing, after warm-up rounds [warm, from).
template <class A>
void expect_no_allocation(const std::string& name, A& alg, std::uint32_t warm, std::uint32_t from, std::uint32_t to) {
  for (std::uint32_t t = warm; t < from; ++t) alg.round(t, oracle, 0.05);
  const std::size_t a = alloc_check::allocations_during([&] {
    for (std::uint32_t t = from; t < to; ++t) alg.round(t, oracle, 0.05);
  });
  std::printf("alloc_check: %-44s rounds %2u..%2u: %zu allocations%s\n", name.c_str(), from, to - 1, a,
              a == 0 ? "" : "  <-- FAIL");
  failures += a != 0;
}

void sparse_push_runs(const std::string& what, sp::phase_schedule phases, const char* schedule, std::uint32_t warm,
                      std::uint32_t from, std::uint32_t to, std::uint32_t warm2 = 0, std::uint32_t from2 = 0,
                      std::uint32_t to2 = 0) {
  for (const std::size_t threads : {1, 2})
    for (const auto mode : {sp::loopback_mode::by_reference, sp::loopback_mode::copied, sp::loopback_mode::encoded}) {
      sp::loopback_network net(n, {.mode = mode});
      sp::sparse_push<float, sp::any_compressor, sp::any_schedule, sp::loopback_network> a(
          initial(), sp::parse_schedule(schedule, n), phases, net, {.threads = threads, .seed = 5});
      const std::string name = what + (mode == sp::loopback_mode::encoded  ? ", encoded"
                                       : mode == sp::loopback_mode::copied ? ", copied"
                                                                           : ", by reference") +
                                ", " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : "");
      expect_no_allocation(name, a, 0, from, to);
      (void)warm;
      if (to2 > 0) expect_no_allocation(name + " (final)", a, warm2, from2, to2);
    }
}
}  // namespace

int main() {
  sparse_push_runs("SP top-1%", sp::sparse_push_phases(sp::parse_compressor("top-k:0.01"), 0.05), "exponential", 0, 8, 20);
  sparse_push_runs("SP top-5% int8", sp::sparse_push_phases(sp::parse_compressor("top-k:0.05+int8"), 0.05),
                   "time-varying-ring", 0, 8, 20);
  sparse_push_runs("SGP", sp::sgp_phases(), "exponential", 0, 8, 20);
  // SCSP: compressed rounds 0..19, exact gossip 20..31; each phase warms up before counting
  sparse_push_runs("SCSP top-1%", sp::scsp_phases(sp::parse_compressor("top-k:0.01"), 0.05, 20, 12), "exponential", 0, 8,
                   20, 20, 24, 32);
  for (const std::size_t threads : {1, 2}) {
    sp::loopback_network net(n);
    sp::choco<float, sp::any_compressor, sp::any_schedule, sp::loopback_network> c(
        initial(), sp::parse_schedule("undirected-ring", n), net,
        {.consensus_step = 0.3, .compressor = sp::parse_compressor("top-k:0.05"), .threads = threads, .seed = 5});
    expect_no_allocation("CHOCO top-5%, " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : ""), c, 0, 8, 20);
  }
  std::printf("alloc_check: %s\n", failures == 0 ? "no round allocated: ok" : "some rounds allocated");
  return failures == 0 ? 0 : 1;
}
