// MPI checks of sparsepush/transport/mpi.hpp, run under mpirun by ctest. Usage:
//   mpi_check bits ALGORITHM NODES   the nodes of this run spread over the ranks give, bit for bit,
//                                    the models and byte counts of the same run in one process
//                                    and every node's bytes, messages and lost envelopes
//                                    (ALGORITHM: sp-int8, scsp, sgp, choco, choco-push (on the random
//                                    directed schedule, one message per link), or sp-lossy: SP with
//                                    30% injected loss and acknowledged recovery; both runs lose
//                                    the same envelopes)
//   mpi_check bits ALGORITHM NODES POLICY   the same over a network in the deferred mode
//   mpi_check policy_bits ALGORITHM NODES POLICY   the nodes run deferred rounds under POLICY too
//                                    (overlap: the in-process bits)
//   mpi_check policy_mass POLICY [choco-push]  exact averaging under POLICY with ranks sleeping at random:
//                                    after the drain sum x and sum u are exact (1e-12)
//                                    (mpi_options::policy = POLICY): the algorithm's lockstep
//                                    collect() on it gives the same bits
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
// The deferred mode (POLICY: overlap, staleness:N, asynchronous[:W]; see run_deferred):
//   mpi_check deferred POLICY        synthetic envelopes over a time-varying ring, random local
//                                    steps, takes by the policy's rule, then the drain: each one
//                                    taken exactly once, intact, in order, never above upto
//   mpi_check alloc_deferred POLICY  its steady-state posts and takes allocate nothing
//   mpi_check slow_rank              asynchronous: the others keep going while rank 0 sleeps 2 s
//   mpi_check stalled                asynchronous: rank 1 stops; the others' liveness error
//   mpi_check window wait|never      a receiver that does not take blocks its sender at the window
//                                    (wait: until it takes; never: the window's error)
//   mpi_check window_range           a window at or above the tags' round range is refused
//   mpi_check idle_wait POLICY       a rank waiting 3 s uses little CPU (< 0.5 s)
//   mpi_check busy_sender            takes do not block on a large frame whose sender computes
// Prints "mpi_check: ... ok" and exits 0, or names what differed and exits 1. In the fault runs
// a rank that catches the expected error prints it and aborts the job (exit code != 0).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <sys/resource.h>
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
  if (alg == "choco-push") return "random:2";
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
std::size_t run(const std::string& alg, std::size_t n, Net& net, std::vector<vec>& models,
                const sp::wait_policy& policy = {}) {
  std::vector<vec> x0;
  for (std::uint32_t i = 0; i < net.local_nodes(); ++i) x0.push_back(initial(net.first_node() + i));
  const auto sched = sp::parse_schedule(schedule_of(alg), n);
  if (alg == "choco-push") {
    sp::choco_push<double, sp::any_compressor, sp::any_schedule, Net> a(
        x0, sched, net,
        {.consensus_step = 0.4, .compressor = sp::parse_compressor("top-k:0.1+int8"), .seed = 3, .policy = policy});
    for (std::uint32_t t = 0; t < rounds; ++t) a.round(t, oracle, 0.05);
    a.drain();  // a no-op in lockstep
    for (std::size_t i = 0; i < a.num_nodes(); ++i) models.push_back(a.model(i));
    return a.bytes_sent();
  }
  if (alg == "choco") {
    sp::choco<double, sp::any_compressor, sp::any_schedule, Net> a(
        x0, sched, net, {.consensus_step = 0.3, .compressor = sp::parse_compressor("top-k:0.1"), .seed = 3});
    for (std::uint32_t t = 0; t < rounds; ++t) a.round(t, oracle, 0.05);
    for (std::size_t i = 0; i < a.num_nodes(); ++i) models.push_back(a.model(i));
    return a.bytes_sent();
  }
  const auto rec = drop_of(alg) > 0 ? sp::loss_recovery::acknowledged : sp::loss_recovery::none;
  sp::sparse_push<double, sp::any_compressor, sp::any_schedule, Net> a(x0, sched, phases_of(alg), net,
                                                                       {.seed = 3, .recovery = rec, .policy = policy});
  for (std::uint32_t t = 0; t < rounds; ++t) a.round(t, oracle, 0.05);
  a.drain();  // a no-op in lockstep
  for (std::size_t i = 0; i < a.num_nodes(); ++i) models.push_back(a.model(i));
  if (drop_of(alg) > 0 && a.messages_dropped() == 0 && a.num_nodes() > 2) {
    std::printf("mpi_check: %s lost no envelope\n", alg.c_str());
    std::exit(1);
  }
  return a.bytes_sent();
}

int bits(const std::string& alg, std::size_t n, const sp::wait_policy& network_policy = {},
         const sp::wait_policy& policy = {}) {
  sp::mpi_network net(MPI_COMM_WORLD, n,
                      {.timeout = std::chrono::seconds(30), .drop_probability = drop_of(alg), .seed = 11,
                       .policy = network_policy});
  net.agree(alg + ";" + std::to_string(n) + ";" + sp::to_string(policy));
  std::vector<vec> local;
  unsigned long long bytes = run(alg, n, net, local, policy);
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
    const std::size_t ref_bytes = run(alg, n, loop, ref, policy);
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
      std::printf("mpi_check: %s (%s), %zu nodes on %d ranks: models, %llu bytes and every node's ledger "
                  "bit-identical to one process: ok\n",
                  alg.c_str(), sp::to_string(policy).c_str(), n, net.ranks(), total);
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

/// CPU seconds (user + system) this process has used.
double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// --- the deferred mode (mpi_options::policy other than lockstep) ---------------------------------

/// A policy from its name: overlap, staleness:N, asynchronous or asynchronous:W.
sp::wait_policy policy_of(const std::string& name) {
  if (name == "lockstep") return {};
  if (name == "overlap") return sp::wait_policy::overlap();
  if (name.starts_with("staleness:")) return sp::wait_policy::staleness(std::stoul(name.substr(10)));
  if (name == "asynchronous") return sp::wait_policy::asynchronous();
  if (name.starts_with("asynchronous:")) return sp::wait_policy::asynchronous(std::stoul(name.substr(13)));
  std::fprintf(stderr, "mpi_check: unknown policy %s\n", name.c_str());
  std::exit(2);
}

/// Node j's synthetic message of round s: dd doubles whose values say (j, s), exactly (identity
/// compressor, f64 values), and its weight.
constexpr std::size_t dd = 50;
double value_of(std::uint32_t j, std::uint32_t s, std::size_t l) { return 1000.0 * j + s + double(l) / 64.0; }
double weight_of(std::uint32_t j, std::uint32_t s) { return 1.0 + j + s / 128.0; }
void synthetic(std::uint32_t j, std::uint32_t s, sp::message& m, vec& x) {
  x.resize(dd);
  for (std::size_t l = 0; l < dd; ++l) x[l] = value_of(j, s, l);
  sp::identity{{sp::value_encoding::f64}}.compress(std::span<const double>(x), m, {.node = j, .round = s});
}

[[noreturn]] void fail(int rank, const std::string& what) {
  std::printf("mpi_check: rank %d: %s\n", rank, what.c_str());
  std::fflush(stdout);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

/// The nodes of this rank post a synthetic message every round over a time-varying ring and take
/// with the policy's rule (upto: mixes_through, must: every outstanding envelope of a round <=
/// waits_through), then drain (posted_rounds, a take of everything, finish_sends). Every
/// (round, sender, receiver) of the schedule must be taken exactly once, with its content, share
/// and weight, never one of a round above upto, and no sender may have more than inbox_rounds()
/// envelopes unmatched. step(t) is the local step of round t (sleeps); ends[t] gets the time
/// (system clock, seconds) each round ended; counted, when not null, gets the allocations of
/// post() and take() in rounds >= rounds / 2.
struct deferred_stats {
  std::size_t taken = 0, largest_pending = 0;
  std::size_t counted_calls = 0, growing_calls = 0;  ///< posts and takes counted; those that grew a buffer
  std::vector<double> ends;
};
template <class Step>
deferred_stats run_deferred(sp::mpi_network& net, const sp::wait_policy& pol, std::uint32_t rounds, Step&& step,
                            unsigned long long* counted = nullptr) {
  const std::size_t n = net.num_nodes();
  const int rank = net.rank();
  const auto sched = sp::parse_schedule("time-varying-ring", n);
  const std::uint32_t first = net.first_node(), local = std::uint32_t(net.local_nodes());
  std::vector<std::vector<sp::awaited>> outstanding(local), early(local);  // early: taken before its round
  std::uint32_t next_round = 0;  // the first round whose envelopes are not in outstanding yet
  std::vector<sp::message> msgs(local);
  std::vector<sp::inbox> boxes(local);
  for (auto& b : boxes) b.dim = dd;
  std::vector<sp::out_edge> out;
  std::vector<sp::in_edge> in;
  std::vector<sp::awaited> must;
  vec x;
  deferred_stats st;
  auto check_box = [&](std::uint32_t i, std::uint32_t upto, const sp::inbox& box) {
    auto& o = outstanding[i - first];
    for (std::size_t k = 0; k < box.envelopes.size(); ++k) {
      const auto& e = box.envelopes[k];
      const std::string what = "node " + std::to_string(i) + " took node " + std::to_string(e.from) +
                               "'s envelope of round " + std::to_string(e.round);
      if (e.round > upto) fail(rank, what + ", above upto " + std::to_string(upto));
      if (k > 0 && (box.envelopes[k - 1].round > e.round ||
                    (box.envelopes[k - 1].round == e.round && box.envelopes[k - 1].from >= e.from)))
        fail(rank, what + " out of (round, sender) order");
      sp::in_edges_of(sched, e.round, i, in);
      const auto w = std::find_if(in.begin(), in.end(), [&](const sp::in_edge& ie) { return ie.from == e.from; });
      const auto it = std::find(o.begin(), o.end(), sp::awaited{e.round, e.from});
      if (it != o.end()) {
        o.erase(it);
      } else {  // of a round the node has not reached (upto above its round): sent to it, not taken before
        auto& ahead = early[i - first];
        if (e.round < next_round || w == in.end() || w->from == i ||
            std::find(ahead.begin(), ahead.end(), sp::awaited{e.round, e.from}) != ahead.end())
          fail(rank, what + ", which it did not expect (taken twice, or not sent to it)");
        ahead.push_back({e.round, e.from});
      }
      bool ok = w != in.end() && e.share == w->share && e.u == weight_of(e.from, e.round) && e.msg &&
                e.msg->dim == dd && e.msg->count == dd;
      for (std::size_t l = 0; ok && l < dd; ++l) ok = e.msg->value_at<double>(l) == value_of(e.from, e.round, l);
      if (!ok) fail(rank, what + " with a wrong share, weight or message");
      ++st.taken;
    }
  };
  auto count = [&](std::uint32_t t, auto&& f) {  // a call that grew a buffer (a new high) may allocate
    if (!counted || t < rounds / 2) return f();
    ++st.counted_calls;
    const std::size_t g0 = net.buffer_growths();
    const auto n_alloc = alloc_check::allocations_during(f);
    if (net.buffer_growths() == g0) *counted += n_alloc;
    else ++st.growing_calls;
  };
  for (std::uint32_t t = 0; t < rounds; ++t) {
    step(t);
    for (std::uint32_t i = first; i < first + local; ++i) {
      synthetic(i, t, msgs[i - first], x);
      sched.out_edges(t, i, out);
      count(t, [&] { net.endpoint(i).post(t, out, weight_of(i, t), msgs[i - first]); });
      if (net.largest_unmatched() > pol.inbox_rounds())
        fail(rank, "a sender had " + std::to_string(net.largest_unmatched()) +
                       " envelopes unmatched, above the window " + std::to_string(pol.inbox_rounds()));
    }
    next_round = t + 1;
    for (std::uint32_t i = first; i < first + local; ++i) {
      sp::in_edges_of(sched, t, i, in);
      auto& ahead = early[i - first];
      for (const auto& e : in) {
        const auto it = std::find(ahead.begin(), ahead.end(), sp::awaited{t, e.from});
        if (it != ahead.end()) ahead.erase(it);
        else if (e.from != i) outstanding[i - first].push_back({t, e.from});
      }
      std::uint32_t upto = 0, through = 0;
      if (!pol.mixes_through(t, upto)) continue;
      const bool waits = pol.waits_through(t, through);
      must.clear();
      for (const auto& a : outstanding[i - first])
        if (waits && a.round <= through) must.push_back(a);
      const std::size_t before = outstanding[i - first].size();
      count(t, [&] { net.endpoint(i).take(t, upto, must, boxes[i - first], outstanding[i - first]); });
      check_box(i, upto, boxes[i - first]);
      for (const auto& a : must)
        if (std::find(outstanding[i - first].begin(), outstanding[i - first].end(), a) != outstanding[i - first].end())
          fail(rank, "round " + std::to_string(t) + ": node " + std::to_string(i) + " returned without node " +
                         std::to_string(a.from) + "'s envelope of round " + std::to_string(a.round) +
                         ", which it must take");
      if (pol.kind == sp::wait_kind::overlap && (before - outstanding[i - first].size() != must.size()))
        fail(rank, "overlap: node " + std::to_string(i) + " took other envelopes than round t - 1's");
    }
    st.ends.push_back(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  }
  // the drain: every node learns how far every node got, takes everything, and the sends complete
  const std::vector<std::uint32_t> mine(local, rounds);
  const std::vector<std::uint32_t> all = net.posted_rounds(mine);
  for (std::size_t j = 0; j < n; ++j)
    if (all.size() != n || all[j] != rounds) fail(rank, "posted_rounds: node " + std::to_string(j) + " is wrong");
  for (std::uint32_t i = first; i < first + local; ++i) {
    const std::vector<sp::awaited> rest = outstanding[i - first];
    net.endpoint(i).take(sp::all_rounds, sp::all_rounds, rest, boxes[i - first], rest);
    check_box(i, sp::all_rounds, boxes[i - first]);
    if (!outstanding[i - first].empty() || net.pending_envelopes(i) != 0)
      fail(rank, "node " + std::to_string(i) + " has envelopes left after the drain");
    st.largest_pending = std::max(st.largest_pending, net.largest_pending(i));
  }
  net.finish_sends();
  // every envelope of the schedule was taken once: count them over the ranks
  unsigned long long mine_taken = st.taken, taken = 0, want = 0;
  MPI_Allreduce(&mine_taken, &taken, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  for (std::uint32_t t = 0; t < rounds; ++t)
    for (std::uint32_t j = 0; j < n; ++j) {
      sched.out_edges(t, j, out);
      for (const auto& e : out) want += e.to != j;
    }
  if (taken != want) fail(rank, std::to_string(taken) + " envelopes taken, the schedule sends " + std::to_string(want));
  return st;
}

/// deferred POLICY: 8 nodes, 30 rounds with random local steps of 0 to 8 ms per rank.
int deferred(const std::string& name) {
  const auto pol = policy_of(name);
  sp::mpi_network net(MPI_COMM_WORLD, 8, {.timeout = std::chrono::seconds(30), .policy = pol});
  net.agree("deferred;" + name);
  std::mt19937 rng(1234u + unsigned(net.rank()));
  std::uniform_int_distribution<int> ms(0, 8);
  const auto st = run_deferred(net, pol, 30,
                               [&](std::uint32_t) { std::this_thread::sleep_for(std::chrono::milliseconds(ms(rng))); });
  unsigned long long largest = st.largest_pending, largest_all = 0, unmatched = net.largest_unmatched(),
                     unmatched_all = 0;
  MPI_Allreduce(&largest, &largest_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&unmatched, &unmatched_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (net.rank() == 0)
    std::printf("mpi_check: deferred %s on %d ranks: every envelope taken once, in order, never above upto, at most "
                "%llu unmatched per sender and receiver (window %u), at most %llu pending from one sender: ok\n",
                sp::to_string(pol).c_str(), net.ranks(), unmatched_all, pol.inbox_rounds(), largest_all);
  net.finish();
  return 0;
}

/// alloc_deferred POLICY: post() and take() of rounds [60, 120) allocate nothing unless they
/// grow a buffer (buffer_growths(): a new high of envelopes in flight or pending, which the
/// ranks' timing decides; usually reached in the warm-up rounds [0, 60)). At most a quarter of
/// the counted calls may grow one: the buffers stay once grown.
int alloc_deferred(const std::string& name) {
  const auto pol = policy_of(name);
  sp::mpi_network net(MPI_COMM_WORLD, 8, {.timeout = std::chrono::seconds(30), .policy = pol});
  net.agree("alloc_deferred;" + name);
  unsigned long long counted = 0, total = 0;
  const auto st = run_deferred(net, pol, 120, [](std::uint32_t) {}, &counted);
  net.finish();
  MPI_Allreduce(&counted, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  unsigned long long largest = st.largest_pending, largest_all = 0;
  MPI_Allreduce(&largest, &largest_all, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  unsigned long long calls[2] = {st.counted_calls, st.growing_calls}, calls_all[2] = {0, 0};
  MPI_Allreduce(calls, calls_all, 2, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  const bool ok = total == 0 && calls_all[0] > 0 && 4 * calls_all[1] <= calls_all[0];
  if (net.rank() == 0)
    std::printf(
        "mpi_check: deferred %s over %d ranks: %llu allocations in steady-state posts and takes that grew no "
        "buffer; %llu of %llu grew one (at most %llu envelopes pending from one sender): %s\n",
        sp::to_string(pol).c_str(), net.ranks(), total, calls_all[1], calls_all[0], largest_all,
        ok ? "no round allocated: ok" : "FAIL");
  return ok ? 0 : 1;
}

/// slow_rank: asynchronous; rank 0's local step of round 5 sleeps 2 s while the others keep
/// posting and taking (rounds of 1 ms): each other rank completes at least inbox_rounds() - 1
/// rounds meanwhile (until a window to rank 0's nodes is full), then everyone drains.
int slow_rank() {
  const auto pol = sp::wait_policy::asynchronous();
  sp::mpi_network net(MPI_COMM_WORLD, 8, {.timeout = std::chrono::seconds(30), .policy = pol});
  net.agree("slow_rank");
  double slept[2] = {0, 0};
  const auto now = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  const std::uint32_t rounds = 5 + 4 * pol.inbox_rounds() + 5;  // enough to fill some windows to rank 0
  const auto st = run_deferred(net, pol, rounds, [&](std::uint32_t t) {
    if (net.rank() == 0 && t == 5) {
      slept[0] = now();
      std::this_thread::sleep_for(std::chrono::seconds(2));
      slept[1] = now();
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  MPI_Bcast(slept, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  int meanwhile = 0;
  for (const double e : st.ends) meanwhile += e > slept[0] && e < slept[1];
  if (net.rank() != 0)
    std::printf("mpi_check: rank %d completed %d rounds while rank 0 slept (the most envelopes unmatched by one "
                "receiver: %zu)\n", net.rank(), meanwhile, net.largest_unmatched());
  std::fflush(stdout);
  int worst = net.rank() == 0 ? 1 << 30 : meanwhile, worst_all = 0;
  MPI_Allreduce(&worst, &worst_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  net.finish();
  const bool ok = worst_all >= int(pol.inbox_rounds()) - 1;
  if (net.rank() == 0)
    std::printf("mpi_check: slow_rank: the other ranks completed at least %d rounds while rank 0 slept (want >= %u), "
                "then every envelope was delivered once: %s\n",
                worst_all, pol.inbox_rounds() - 1, ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}

/// stalled: asynchronous (window 64), timeout 2 s, rounds of 50 ms; rank 1 stops posting at round
/// 3 and sleeps past the timeout: the others must end the job with the liveness error naming
/// rank 1's nodes.
int stalled() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    const auto pol = sp::wait_policy::asynchronous(64);
    sp::mpi_network net(MPI_COMM_WORLD, 8, {.timeout = std::chrono::milliseconds(2000), .policy = pol});
    net.agree("stalled");
    run_deferred(net, pol, 200, [&](std::uint32_t t) {
      if (rank == 1 && t == 3) {
        std::this_thread::sleep_for(std::chrono::seconds(6));
        std::printf("mpi_check: rank 1 woke up: the other ranks did not end the job\n");
        std::fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    });
  } catch (const sp::error& e) {
    fail_job(rank, e.what());
  }
  std::printf("mpi_check: rank %d finished without the expected error\n", rank);
  return 1;
}

/// window wait: 2 nodes on 2 ranks, overlap (a window of 2); rank 1 does not take for 1.5 s while
/// node 0 posts rounds 0..7 to node 1: the post of round 2 waits until rank 1 takes, then the rest
/// proceed, and node 1 gets all 8 in order. window never: rank 1 never takes; node 0's post of
/// round 2 ends in the window's transport_error after the 2 s timeout.
int window(const std::string& how) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool never = how == "never";
  const auto pol = sp::wait_policy::overlap();
  try {
    sp::mpi_network net(MPI_COMM_WORLD, 2, {.timeout = std::chrono::milliseconds(never ? 2000 : 10000), .policy = pol});
    net.agree("window;" + how);
    const std::uint32_t rounds = 8;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      sp::message m;
      vec x;
      const std::vector<sp::out_edge> out{{0, 0.5}, {1, 0.5}};
      std::vector<double> took;
      for (std::uint32_t t = 0; t < rounds; ++t) {
        synthetic(0, t, m, x);
        const double t0 = MPI_Wtime();
        net.endpoint(0).post(t, out, weight_of(0, t), m);
        took.push_back(MPI_Wtime() - t0);
      }
      net.finish_sends();
      const bool ok = took[0] < 0.5 && took[1] < 0.5 && took[2] > 1.0 && net.largest_unmatched() == 2 &&
                      net.timing().wait > 1.0;
      std::printf("mpi_check: window: posts took %.3f, %.3f, %.3f s (the third waits for the receiver), the others at "
                  "most %.3f s; largest unmatched %zu, waiting %.2f s: %s\n",
                  took[0], took[1], took[2], *std::max_element(took.begin() + 3, took.end()), net.largest_unmatched(),
                  net.timing().wait, ok ? "ok" : "FAIL");
      std::fflush(stdout);
      MPI_Barrier(MPI_COMM_WORLD);
      net.finish();
      return ok ? 0 : 1;
    }
    if (never) {
      std::this_thread::sleep_for(std::chrono::seconds(6));
      std::printf("mpi_check: rank 1 woke up: rank 0 did not end the job\n");
      std::fflush(stdout);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    std::vector<sp::awaited> all;
    for (std::uint32_t t = 0; t < rounds; ++t) all.push_back({t, 0});
    sp::inbox box;
    box.dim = dd;
    net.endpoint(1).take(sp::all_rounds, sp::all_rounds, all, box, all);
    bool ok = box.envelopes.size() == rounds;
    for (std::uint32_t t = 0; ok && t < rounds; ++t)
      ok = box.envelopes[t].round == t && box.envelopes[t].from == 0 &&
           box.envelopes[t].msg->value_at<double>(3) == value_of(0, t, 3);
    MPI_Barrier(MPI_COMM_WORLD);
    net.finish();
    if (!ok) std::printf("mpi_check: rank 1 did not take rounds 0..7 of node 0 in order\n");
    return ok ? 0 : 1;
  } catch (const sp::error& e) {
    fail_job(rank, e.what());
  }
}

/// window_range: a window must stay below the tag's round range (tag upper bound / block size):
/// one rank hosting so many nodes that the range is below 65536 refuses asynchronous(range) and
/// accepts asynchronous(range - 1).
int window_range() {
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  const long tag_ub = flag ? *static_cast<int*>(ub) : 32767;
  const std::size_t n = std::size_t(tag_ub / 30000 + 1);
  const auto range = std::uint32_t(std::min<long>(tag_ub / long(n), 1L << 20));
  int rc = 0;
  try {
    sp::mpi_network net(MPI_COMM_WORLD, n, {.policy = sp::wait_policy::asynchronous(range)});
    std::printf("mpi_check: a window of %u rounds was accepted with a tag range of %u rounds\n", range, range);
    rc = 1;
  } catch (const sp::config_error& e) {
    if (std::string(e.what()).find("tell only " + std::to_string(range) + " rounds apart") == std::string::npos) {
      std::printf("mpi_check: window_range: '%s' does not name the range %u\n", e.what(), range);
      rc = 1;
    }
  }
  try {
    sp::mpi_network net(MPI_COMM_WORLD, n, {.policy = sp::wait_policy::asynchronous(range - 1)});
  } catch (const sp::error& e) {
    std::printf("mpi_check: window_range: a window of %u rounds was refused: %s\n", range - 1, e.what());
    rc = 1;
  }
  if (rc == 0)
    std::printf("mpi_check: window_range: %zu nodes on one rank tell %u rounds apart: a window of %u refused, %u "
                "accepted: ok\n", n, range, range, range - 1);
  return rc;
}

/// idle_wait POLICY: waiting blocks, it does not poll. Rank 0 sleeps 3 s before its node 0 posts
/// round 0 to every node; the other ranks' nodes wait for that envelope, in collect() (lockstep)
/// or in take() (any other policy). Such a waiting rank's CPU time (user + system) over the wait
/// must be small (< 0.5 s; polling with yield burns the whole 3 s).
int idle_wait(const std::string& name) {
  const std::size_t n = 4;
  const auto pol = policy_of(name);
  sp::mpi_network net(MPI_COMM_WORLD, n, {.timeout = std::chrono::seconds(30), .policy = pol});
  net.agree("idle_wait;" + name);
  sp::message m;
  vec x;
  synthetic(0, 0, m, x);
  std::vector<sp::out_edge> all;
  for (std::uint32_t i = 0; i < n; ++i) all.push_back({i, 1.0 / double(n)});
  const std::vector<sp::in_edge> from0{{0, 1.0 / double(n)}};
  const std::vector<sp::awaited> must{{0, 0}};
  if (net.rank() == 0) std::this_thread::sleep_for(std::chrono::seconds(3));
  const double c0 = cpu_seconds(), w0 = MPI_Wtime();
  for (std::uint32_t i = net.first_node(); i < net.first_node() + net.local_nodes(); ++i) {
    const std::vector<sp::out_edge> self_only{{i, 1.0}};
    net.endpoint(i).post(0, i == 0 ? std::span<const sp::out_edge>(all) : std::span<const sp::out_edge>(self_only),
                         1.0, m);
  }
  sp::inbox box;
  for (std::uint32_t i = net.first_node(); i < net.first_node() + net.local_nodes(); ++i) {
    if (i == 0) continue;
    if (pol.lockstep()) net.endpoint(i).collect(0, from0, box);
    else net.endpoint(i).take(0, 0, must, box, must);
    if (box.envelopes.size() != 1) {
      std::printf("mpi_check: node %u received %zu envelopes\n", i, box.envelopes.size());
      return 1;
    }
  }
  const double cpu = cpu_seconds() - c0, wall = MPI_Wtime() - w0;
  net.finish();
  double worst = net.rank() == 0 ? 0.0 : cpu, worst_all = 0;
  MPI_Allreduce(&worst, &worst_all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  std::printf("mpi_check: rank %d waited %.2f s in %s, using %.3f s of CPU (network's waiting time %.2f s)\n",
              net.rank(), wall, pol.lockstep() ? "collect" : "take", cpu, net.timing().wait);
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (net.rank() == 0)
    std::printf("mpi_check: idle_wait %s: a waiting rank used at most %.3f s of CPU over a 3 s wait: %s\n",
                sp::to_string(pol).c_str(), worst_all, worst_all < 0.5 ? "ok" : "FAIL (it polls)");
  return worst_all < 0.5 ? 0 : 1;
}

/// busy_sender: 2 nodes on 2 ranks, overlap. Node 0 posts a large envelope (1M doubles: a
/// rendezvous transfer on every transport), calls the network for 3 ms, then computes 3 s
/// without calling MPI; node 1 keeps taking without waiting (must empty): no take may block on
/// the busy sender (a blocking MPI_Mrecv does, over TCP, until the sender calls in again), and
/// the envelope arrives (when the sender's rank, or MPI's progress thread, moves it).
int busy_sender() {
  const std::size_t big = 1000000;
  sp::mpi_network net(MPI_COMM_WORLD, 2, {.timeout = std::chrono::seconds(20), .policy = sp::wait_policy::overlap()});
  net.agree("busy_sender");
  sp::message m;
  const vec x(big, 1.5);
  sp::identity{{sp::value_encoding::f64}}.compress(std::span<const double>(x), m, {});
  sp::inbox box;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  int rc = 0;
  if (net.rank() == 0) {
    const std::vector<sp::out_edge> out{{0, 0.5}, {1, 0.5}};
    net.endpoint(0).post(0, out, 1.0, m);
    for (int k = 0; k < 3; ++k) {
      net.endpoint(0).take(0, 0, {}, box, {});
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::seconds(3));
    net.finish_sends();
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    double longest = 0;
    while (box.envelopes.empty() && MPI_Wtime() - t0 < 10) {
      const double a = MPI_Wtime();
      net.endpoint(1).take(0, 0, {}, box, {});
      longest = std::max(longest, MPI_Wtime() - a);
      if (box.envelopes.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const bool ok = longest < 1.0 && box.envelopes.size() == 1 && box.envelopes[0].msg->count == big;
    std::printf("mpi_check: busy_sender: the longest take lasted %.3f s, the envelope of %zu doubles came after %.2f s: "
                "%s\n", longest, big, MPI_Wtime() - t0, ok ? "ok" : "FAIL");
    rc = ok ? 0 : 1;
  }
  std::fflush(stdout);
  MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  net.finish();
  return rc;
}

/// Exact push-sum averaging (no local step) under `name` with random per-rank sleeps, drained at
/// the end: sum x over every node equals sum x(0) and sum u equals n (1e-12 relative), though
/// the ranks ran at different speeds (the largest staleness mixed is printed).
int policy_mass(const std::string& name, const std::string& alg) {
  const std::size_t n = 12;
  const auto policy = policy_of(name);
  sp::mpi_network net(MPI_COMM_WORLD, n, {.timeout = std::chrono::seconds(30), .policy = policy});
  net.agree("policy_mass;" + name + ";" + alg);
  std::vector<vec> x0;
  for (std::uint32_t i = 0; i < net.local_nodes(); ++i) x0.push_back(initial(net.first_node() + i));
  std::mt19937 gen(static_cast<unsigned>(17 + net.rank()));
  std::uniform_int_distribution<int> ms(0, 3 * net.rank());
  vec mine(d + 1, 0.0), all(d + 1, 0.0), start(d + 1, 0.0), start_all(d + 1, 0.0);
  unsigned stale = 0;
  auto gossip_rounds = [&](auto& a) {
    for (std::uint32_t t = 0; t < 60; ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms(gen)));
      a.round(t, std::span<const std::span<const double>>(), 0.0);
    }
    a.drain();
    stale = a.max_staleness();
  };
  if (alg == "choco-push") {  // top-K differences: a link's messages reordered by MPI are applied in order
    sp::choco_push<double, sp::any_compressor, sp::any_schedule, sp::mpi_network> a(
        x0, sp::parse_schedule("exponential", n), net,
        {.consensus_step = 0.4, .compressor = sp::parse_compressor("top-k:0.1"), .policy = policy});
    gossip_rounds(a);
    for (std::size_t i = 0; i < a.num_nodes(); ++i) {
      for (std::size_t l = 0; l < d; ++l) mine[l] += a.node(i).x()[l], start[l] += x0[i][l];
      mine[d] += a.node(i).u();
      start[d] += 1.0;
    }
  } else {
    sp::phase gossip;
    gossip.local_step = false;
    gossip.exact = true;
    const sp::phase_schedule averaging({gossip});
    sp::sparse_push<double, sp::any_compressor, sp::any_schedule, sp::mpi_network> a(
        x0, sp::parse_schedule("exponential", n), averaging, net, {.policy = policy});
    gossip_rounds(a);
    for (std::size_t i = 0; i < a.num_nodes(); ++i) {
      for (std::size_t l = 0; l < d; ++l) mine[l] += a.group().x(i)[l], start[l] += x0[i][l];
      mine[d] += a.group().u(i);
      start[d] += 1.0;
    }
  }
  MPI_Allreduce(mine.data(), all.data(), int(d + 1), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(start.data(), start_all.data(), int(d + 1), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  double worst = 0, scale = 0;
  for (std::size_t l = 0; l <= d; ++l) scale = std::max(scale, std::abs(start_all[l]));
  for (std::size_t l = 0; l <= d; ++l) worst = std::max(worst, std::abs(all[l] - start_all[l]) / scale);
  unsigned stale_all = 0;
  MPI_Allreduce(&stale, &stale_all, 1, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
  const int rc = worst < 1e-12 ? 0 : 1;
  if (net.rank() == 0)
    std::printf("mpi_check: policy_mass %s (%s) on %d ranks: sum x and sum u after the drain within %.2g (relative) "
                "of their start, largest staleness mixed %u: %s\n",
                name.c_str(), alg.c_str(), net.ranks(), worst, stale_all, rc == 0 ? "ok" : "FAILED");
  return rc;
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
  else if (mode == "bits" && argc == 5) rc = bits(argv[2], std::stoul(argv[3]), policy_of(argv[4]));
  else if (mode == "policy_bits" && argc == 5) rc = bits(argv[2], std::stoul(argv[3]), policy_of(argv[4]), policy_of(argv[4]));
  else if (mode == "policy_mass" && (argc == 3 || argc == 4)) rc = policy_mass(argv[2], argc == 4 ? argv[3] : "sp");
  else if (mode == "fault" && argc == 3) rc = fault(argv[2]);
  else if (mode == "alloc" && argc == 3) rc = alloc(argv[2]);
  else if (mode == "timeout" && argc == 2) rc = bad_timeout();
  else if (mode == "idle_wait" && argc == 3) rc = idle_wait(argv[2]);
  else if (mode == "deferred" && argc == 3) rc = deferred(argv[2]);
  else if (mode == "alloc_deferred" && argc == 3) rc = alloc_deferred(argv[2]);
  else if (mode == "slow_rank" && argc == 2) rc = slow_rank();
  else if (mode == "stalled" && argc == 2) rc = stalled();
  else if (mode == "window" && argc == 3) rc = window(argv[2]);
  else if (mode == "window_range" && argc == 2) rc = window_range();
  else if (mode == "busy_sender" && argc == 2) rc = busy_sender();
  else
    std::fprintf(stderr, "usage: mpi_check bits ALGORITHM NODES | alloc ALGORITHM | timeout | fault "
                         "stall|exit|round|settings|stop_allgather|stop_sum|stop_ordered_sum | idle_wait POLICY | "
                         "deferred POLICY | alloc_deferred POLICY | slow_rank | stalled | window wait|never | "
                         "window_range | busy_sender\n");
  MPI_Finalize();
  return rc;
}
