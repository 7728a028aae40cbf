// MPI checks of sparsepush/transport/mpi.hpp, run under mpirun by ctest. Usage:
//   mpi_check bits ALGORITHM NODES   the nodes of this run spread over the ranks give, bit for bit,
//                                    the models and byte counts of the same run in one process
//                                    and every node's bytes, messages and lost envelopes
//                                    (ALGORITHM: sp-int8, scsp, sgp, choco, or sp-lossy: SP with
//                                    30% injected loss and acknowledged recovery; both runs lose
//                                    the same envelopes)
//   mpi_check alloc ALGORITHM        after warm-up rounds, rounds of ALGORITHM (sp, scsp, sgp, choco)
//                                    over MPI make no C++ allocation on any rank (a counting
//                                    global operator new)
//   mpi_check fault KIND             rank 1 misbehaves at round 3 (KIND: stall, exit, round,
//                                    settings); the other ranks must fail with a clear error
//   mpi_check fault stop_OP          rank 1 stops calling the process group (train/mpi.hpp) while
//                                    the others enter OP (allgather, sum, ordered_sum): they must
//                                    throw transport_error naming OP's wait within the timeout
//                                    (not hang), and every later call of theirs must throw too
//   mpi_check timeout               a timeout of 0 or -5 ms is refused with config_error giving
//                                    the value, before any MPI call
// Prints "mpi_check: ... ok" and exits 0, or names what differed and exits 1. In the fault runs
// a rank that catches the expected error prints it and aborts the job (exit code != 0).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <sparsepush/sparsepush.hpp>
#include <sparsepush/train/mpi.hpp>
#include <sparsepush/transport/mpi.hpp>

#include "../alloc/counting_new.hpp"

namespace sp = sparsepush;
using vec = std::vector<double>;

namespace {
constexpr std::size_t d = 300;
constexpr std::uint32_t rounds = 24;

vec initial(std::uint32_t i) {
  vec x(d);
  for (std::size_t l = 0; l < d; ++l) x[l] = std::sin(0.7 * double(l + 1) * double(i + 1));
  return x;
}

const sp::gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t t, std::span<const double> x,
                                              std::span<double> p) {
  for (std::size_t l = 0; l < d; ++l) p[l] = x[l] - std::cos(0.1 * double(l) * double(i + 1) + 0.01 * t);
};

std::string schedule_of(const std::string& alg) {
  return alg == "choco" ? "undirected-ring" : alg == "sp-lossy" ? "exponential" : "time-varying-ring";
}
double drop_of(const std::string& alg) { return alg == "sp-lossy" ? 0.3 : 0.0; }

sp::phase_schedule phases_of(const std::string& alg) {
  if (alg == "sgp") return sp::sgp_phases();
  if (alg == "scsp") return sp::scsp_phases(sp::parse_compressor("top-k:0.05"), 0.1, rounds - 6, 6);
  return sp::sparse_push_phases(sp::parse_compressor("top-k:0.05+int8"), 0.1);
}

/// Run the algorithm over `net` (MPI: this rank's block; loopback: every node); write the local
/// models and return the bytes this process's nodes sent.
template <class Net>
std::size_t run(const std::string& alg, std::size_t n, Net& net, std::vector<vec>& models) {
  std::vector<vec> x0;
  for (std::uint32_t i = 0; i < net.local_nodes(); ++i) x0.push_back(initial(net.first_node() + i));
  const auto sched = sp::parse_schedule(schedule_of(alg), n);
  if (alg == "choco") {
    sp::choco<double, sp::any_compressor, sp::any_schedule, Net> a(
        x0, sched, net, {.consensus_step = 0.3, .compressor = sp::parse_compressor("top-k:0.1"), .seed = 3});
    for (std::uint32_t t = 0; t < rounds; ++t) a.round(t, oracle, 0.05);
    for (std::size_t i = 0; i < a.num_nodes(); ++i) models.push_back(a.model(i));
    return a.bytes_sent();
  }
  const auto rec = drop_of(alg) > 0 ? sp::loss_recovery::acknowledged : sp::loss_recovery::none;
  sp::sparse_push<double, sp::any_compressor, sp::any_schedule, Net> a(x0, sched, phases_of(alg), net,
                                                                       {.seed = 3, .recovery = rec});
  for (std::uint32_t t = 0; t < rounds; ++t) a.round(t, oracle, 0.05);
  for (std::size_t i = 0; i < a.num_nodes(); ++i) models.push_back(a.model(i));
  if (drop_of(alg) > 0 && a.messages_dropped() == 0 && a.num_nodes() > 2) {
    std::printf("mpi_check: %s lost no envelope\n", alg.c_str());
    std::exit(1);
  }
  return a.bytes_sent();
}

int bits(const std::string& alg, std::size_t n) {
  sp::mpi_network net(MPI_COMM_WORLD, n, {.timeout = std::chrono::seconds(30), .drop_probability = drop_of(alg), .seed = 11});
  net.agree(alg + ";" + std::to_string(n));
  std::vector<vec> local;
  unsigned long long bytes = run(alg, n, net, local);
  net.finish();
  // gather every node's model on rank 0, in node order
  vec flat;
  for (const auto& m : local) flat.insert(flat.end(), m.begin(), m.end());
  std::vector<int> counts(static_cast<std::size_t>(net.ranks())), displs(counts.size());
  const int mine = static_cast<int>(flat.size());
  MPI_Gather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (std::size_t r = 1; r < counts.size(); ++r) displs[r] = displs[r - 1] + counts[r - 1];
  vec all(n * d);
  MPI_Gatherv(flat.data(), mine, MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE, 0, MPI_COMM_WORLD);
  unsigned long long total = 0;
  MPI_Reduce(&bytes, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
  // every node's ledger (bytes, messages, lost envelopes), on rank 0 in node order
  std::vector<unsigned long long> mine_ledger;
  for (std::uint32_t i = net.first_node(); i < net.first_node() + net.local_nodes(); ++i)
    mine_ledger.insert(mine_ledger.end(), {net.bytes_sent(i), net.messages_sent(i), net.messages_dropped(i)});
  const int mine3 = static_cast<int>(mine_ledger.size());
  std::vector<int> counts3(counts.size()), displs3(counts.size());
  MPI_Gather(&mine3, 1, MPI_INT, counts3.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  for (std::size_t r = 1; r < counts3.size(); ++r) displs3[r] = displs3[r - 1] + counts3[r - 1];
  std::vector<unsigned long long> ledgers(3 * n);
  MPI_Gatherv(mine_ledger.data(), mine3, MPI_UNSIGNED_LONG_LONG, ledgers.data(), counts3.data(), displs3.data(),
              MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
  int rc = 0;
  if (net.rank() == 0) {
    sp::loopback_network loop(n, {.drop_probability = drop_of(alg), .seed = 11});
    std::vector<vec> ref;
    const std::size_t ref_bytes = run(alg, n, loop, ref);
    for (std::size_t i = 0; i < n; ++i)
      if (std::memcmp(ref[i].data(), all.data() + i * d, d * sizeof(double)) != 0) {
        std::printf("mpi_check: %s, %zu nodes on %d ranks: node %zu differs from the in-process run\n", alg.c_str(), n,
                    net.ranks(), i);
        rc = 1;
      }
    if (ref_bytes != total) {
      std::printf("mpi_check: %s: %llu bytes sent on MPI, %zu in process\n", alg.c_str(), total, ref_bytes);
      rc = 1;
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      const unsigned long long want[3] = {loop.bytes_sent(i), loop.messages_sent(i), loop.messages_dropped(i)};
      if (!std::equal(want, want + 3, ledgers.begin() + 3 * i)) {
        std::printf("mpi_check: %s: node %u's ledger (bytes, messages, lost) is %llu, %llu, %llu on MPI, "
                    "%llu, %llu, %llu in process\n", alg.c_str(), i, ledgers[3 * i], ledgers[3 * i + 1],
                    ledgers[3 * i + 2], want[0], want[1], want[2]);
        rc = 1;
      }
    }
    if (rc == 0)
      std::printf("mpi_check: %s, %zu nodes on %d ranks: models, %llu bytes and every node's ledger "
                  "bit-identical to one process: ok\n",
                  alg.c_str(), n, net.ranks(), total);
  }
  MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return rc;
}

/// Rounds [8, 20) (and for SCSP its exact rounds [24, 32)) allocate nothing on this rank after
/// warm-up; the verdict is agreed over all ranks.
int alloc(const std::string& alg) {
  const std::size_t n = 8;
  sp::mpi_network net(MPI_COMM_WORLD, n, {.timeout = std::chrono::seconds(30)});
  net.agree("alloc;" + alg);
  std::vector<vec> x0;
  for (std::uint32_t i = 0; i < net.local_nodes(); ++i) x0.push_back(initial(net.first_node() + i));
  unsigned long long counted = 0;
  auto measure = [&](auto& a, std::uint32_t warm, std::uint32_t from, std::uint32_t to) {
    for (std::uint32_t t = warm; t < from; ++t) a.round(t, oracle, 0.05);
    counted += alloc_check::allocations_during([&] {
      for (std::uint32_t t = from; t < to; ++t) a.round(t, oracle, 0.05);
    });
  };
  if (alg == "choco") {
    sp::choco<double, sp::any_compressor, sp::any_schedule, sp::mpi_network> a(
        x0, sp::parse_schedule("undirected-ring", n), net,
        {.consensus_step = 0.3, .compressor = sp::parse_compressor("top-k:0.05"), .seed = 3});
    measure(a, 0, 8, 20);
  } else {
    const auto phases = alg == "sgp"    ? sp::sgp_phases()
                        : alg == "scsp" ? sp::scsp_phases(sp::parse_compressor("top-k:0.05"), 0.1, 20, 12)
                                        : sp::sparse_push_phases(sp::parse_compressor("top-k:0.05"), 0.1);
    sp::sparse_push<double, sp::any_compressor, sp::any_schedule, sp::mpi_network> a(
        x0, sp::parse_schedule("exponential", n), phases, net, {.seed = 3});
    measure(a, 0, 8, 20);
    if (alg == "scsp") measure(a, 20, 24, 32);
  }
  net.finish();
  unsigned long long total = 0;
  MPI_Allreduce(&counted, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (net.rank() == 0)
    std::printf("mpi_check: %s over %d ranks: %llu allocations in steady-state rounds: %s\n", alg.c_str(),
                net.ranks(), total, total == 0 ? "no round allocated: ok" : "FAIL");
  return total == 0 ? 0 : 1;
}

[[noreturn]] void fail_job(int rank, const char* what) {
  std::fprintf(stderr, "mpi_check: rank %d: %s\n", rank, what);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the other ranks print theirs
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();
}

/// A timeout that is not positive would make every wait fail at once: refused, naming the value.
int bad_timeout() {
  int rc = 0;
  for (const long ms : {0L, -5L}) {
    const std::string want = "MPI timeout must be positive (got " + std::to_string(ms) + " ms)";
    try {
      sp::mpi_network net(MPI_COMM_WORLD, 4, {.timeout = std::chrono::milliseconds(ms)});
      std::printf("mpi_check: a timeout of %ld ms was accepted\n", ms);
      rc = 1;
    } catch (const sp::config_error& e) {
      if (std::string(e.what()).find(want) == std::string::npos) {
        std::printf("mpi_check: a timeout of %ld ms: '%s' lacks '%s'\n", ms, e.what(), want.c_str());
        rc = 1;
      }
    }
  }
  if (rc == 0) std::printf("mpi_check: timeouts of 0 and -5 ms refused, naming the value: ok\n");
  return rc;
}

/// Rank 1 calls the process group three times with the others (each result checked against what
/// the ranks contributed), then stops calling it (sleeps past the timeout). The others, in `op`,
/// must throw transport_error after the timeout and before the timeout + 2 s, and then refuse the
/// next call (the ranks are out of step).
int stop_collective(const std::string& op) {
  const std::size_t n = 7;  // uneven blocks: 3, 2, 2 on 3 ranks
  const auto timeout = std::chrono::milliseconds(2000);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    sp::mpi_network net(MPI_COMM_WORLD, n, {.timeout = timeout});
    sp::mpi_process_group g(net);
    const std::uint32_t first = g.first_node();
    vec mine(g.local_nodes());
    for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = 1.5 * double(first + i);
    auto call = [&](std::uint32_t k) {  // one call of op; false when its result is wrong
      if (op == "allgather") {
        const vec all = g.allgather(mine);
        for (std::size_t i = 0; i < n; ++i)
          if (all.size() != n || all[i] != 1.5 * double(i)) return false;
        return true;
      }
      if (op == "sum") return g.sum(std::uint64_t(rank) + k) == std::uint64_t(g.ranks()) * (g.ranks() - 1) / 2 + std::uint64_t(g.ranks()) * k;
      std::vector<float> af(5, 0.0f);
      vec ad(3, 0.0);
      g.ordered_sum(af, ad, [&] {
        for (std::uint32_t i = first; i < first + g.local_nodes(); ++i) {
          for (auto& v : af) v += float(i);
          for (auto& v : ad) v += double(i) + k;
        }
      });
      const double want = double(n * (n - 1) / 2);  // 0 + 1 + ... + n-1, exact in float and double
      return std::all_of(af.begin(), af.end(), [&](float v) { return v == float(want); }) &&
             std::all_of(ad.begin(), ad.end(), [&](double v) { return v == want + double(n * k); });
    };
    for (std::uint32_t k = 0; k < 3; ++k)
      if (!call(k)) {
        std::printf("mpi_check: rank %d: %s call %u gave a wrong result\n", rank, op.c_str(), k);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    if (rank == 1) {  // stops: alive, never arriving (the job is aborted before it wakes)
      std::this_thread::sleep_for(3 * timeout);
      std::printf("mpi_check: rank 1 woke up: the other ranks did not end the job\n");
      std::fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const double t0 = MPI_Wtime();
    try {
      call(3);
    } catch (const sp::transport_error& e) {
      const double s = MPI_Wtime() - t0, limit = 0.001 * double(timeout.count());
      std::string then = "no error";
      try {
        call(4);
      } catch (const sp::transport_error& e2) {
        then = e2.what();
      }
      char when[160];
      std::snprintf(when, sizeof when, " after %.2f s (%s); the next call: ", s,
                    s >= limit && s < limit + 2 ? "within the timeout" : "NOT within the timeout");
      fail_job(rank, (std::string(e.what()) + when + then).c_str());
    }
    std::printf("mpi_check: rank %d: %s returned without rank 1\n", rank, op.c_str());
  } catch (const sp::error& e) {
    std::printf("mpi_check: rank %d: unexpected error: %s\n", rank, e.what());
  }
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
  return 1;
}

int fault(const std::string& kind) {
  if (kind.starts_with("stop_")) return stop_collective(kind.substr(5));
  const std::size_t n = 8;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    sp::mpi_network net(MPI_COMM_WORLD, n, {.timeout = std::chrono::milliseconds(2000)});
    net.agree(kind == "settings" && rank == 1 ? "seed=2" : "seed=1");
    std::vector<vec> x0;
    for (std::uint32_t i = 0; i < net.local_nodes(); ++i) x0.push_back(initial(net.first_node() + i));
    sp::sparse_push<double, sp::any_compressor, sp::any_schedule, sp::mpi_network> a(
        x0, sp::parse_schedule("time-varying-ring", n), phases_of("sp-int8"), net);
    const std::uint32_t start = kind == "round" && rank == 1 ? 5 : 0;
    for (std::uint32_t t = start; t < start + rounds; ++t) {
      if (rank == 1 && t == 3 && kind == "stall") std::this_thread::sleep_for(std::chrono::seconds(6));
      if (rank == 1 && t == 3 && kind == "exit") {  // dies: no MPI_Finalize, no goodbye
        std::fprintf(stderr, "mpi_check: rank 1 exits at round 3\n");
        std::fflush(stderr);
        std::_Exit(0);
      }
      a.round(t, oracle, 0.05);
    }
    net.finish();
  } catch (const sp::error& e) {
    fail_job(rank, e.what());
  }
  std::printf("mpi_check: rank %d finished without the expected error\n", rank);
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rc = 2;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "bits" && argc == 4) rc = bits(argv[2], std::stoul(argv[3]));
  else if (mode == "fault" && argc == 3) rc = fault(argv[2]);
  else if (mode == "alloc" && argc == 3) rc = alloc(argv[2]);
  else if (mode == "timeout" && argc == 2) rc = bad_timeout();
  else std::fprintf(stderr, "usage: mpi_check bits ALGORITHM NODES | alloc ALGORITHM | timeout | fault stall|exit|round|settings|stop_allgather|stop_sum|stop_ordered_sum\n");
  MPI_Finalize();
  return rc;
}
