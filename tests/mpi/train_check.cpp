// The library trainer under MPI (sparsepush/train/mpi.hpp), run by ctest under mpirun:
//   train_check ALGORITHM NODES   every rank runs its block of the nodes with mpi_process_group
//                                 and, as the reference, the whole run in this process with
//                                 single_process over a loopback; the metrics (node accuracies,
//                                 averaged model, divergence), bytes, messages, dropped envelopes
//                                 and weight mass of the two runs must be the same bits, on
//                                 every rank (ALGORITHM: sp, scsp, choco, choco-push, sp-lossy). Both runs
//                                 checkpoint every 4 rounds and evaluate every 6: over more
//                                 than one rank the mean loss is known (gathered) at those
//                                 rounds only, and then it is the one-process run's bits; a run
//                                 resumed from the MPI run's last checkpoint ends with the same
//                                 result.
// Prints "train_check: ... ok" on rank 0 and exits 0, or names what differed and exits 1.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <sparsepush/sparsepush.hpp>
#include <sparsepush/train/mpi.hpp>
#include <sparsepush/train/trainer.hpp>

#include "../train_fixture.hpp"

namespace sp = sparsepush;
namespace tf = train_fixture;

namespace {

template <class G, class... Net>
sp::train_result train(const std::string& alg, std::size_t n, const std::string& ckpt, const std::string& resume,
                       std::vector<sp::round_status>& log,
                       G& group, Net&... net) {
  std::vector<std::vector<double>> x0;
  for (std::uint32_t i = 0; i < group.local_nodes(); ++i) x0.push_back(tf::initial(group.first_node() + i));
  tf::backend be(n, group.first_node(), group.local_nodes());
  sp::trainer_options o;
  o.rounds = 24;
  o.train_rounds = alg == "scsp" ? 18 : 24;
  o.lr = [](std::uint32_t t) { return 0.05 / (1.0 + 0.01 * t); };
  o.eval_every = 6;        // rounds 6, 12, 18, 24
  o.checkpoint_dir = ckpt;
  o.checkpoint_every = 4;  // rounds 4, 8, 16 and 20 are not evaluations
  o.resume_dir = resume;
  sp::run_settings s;
  s.add("algorithm", alg).add("nodes", n);
  sp::trainer_callbacks cb;
  cb.guard = sp::default_divergence_guard;
  cb.progress = [&log](const sp::round_status& st) { log.push_back(st); };
  sp::trainer<double, G> tr(group, s, o, be.hooks(), cb);
  using net_t = std::conditional_t<sizeof...(Net) == 0, sp::loopback_network, std::remove_reference_t<decltype((net, ...))>>;
  if (alg == "choco-push") {
    sp::choco_push<double, sp::any_compressor, sp::any_schedule, net_t> a(
        std::move(x0), sp::parse_schedule("random:1", n, 4), net...,
        {.consensus_step = 0.4, .compressor = sp::parse_compressor("top-k:0.2"), .threads = 2, .seed = 5});
    return tr.run(a);
  }
  if (alg == "choco") {
    sp::choco<double, sp::any_compressor, sp::any_schedule, net_t> a(
        std::move(x0), sp::parse_schedule("undirected-ring", n), net...,
        {.consensus_step = 0.4, .compressor = sp::parse_compressor("top-k:0.2"), .threads = 2, .seed = 5});
    return tr.run(a);
  }
  const double drop = alg == "sp-lossy" ? 0.3 : 0.0;
  const auto phases = alg == "scsp" ? sp::scsp_phases(sp::parse_compressor("top-k:0.1+int8"), 0.2, 18, 6)
                                    : sp::sparse_push_phases(sp::parse_compressor("top-k:0.1"), 0.2);
  sp::sparse_push<double, sp::any_compressor, sp::any_schedule, net_t> a(
      std::move(x0), sp::parse_schedule(drop > 0 ? "exponential" : "time-varying-ring", n), phases, net...,
      sp::sparse_push_options{.threads = 2, .seed = 5, .network = {.drop_probability = drop, .seed = 9},
                              .recovery = sp::loss_recovery::acknowledged});
  return tr.run(a);
}

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int rc = 0;
  try {
    if (argc != 3) throw sp::config_error("usage: train_check sp|scsp|choco|choco-push|sp-lossy NODES");
    const std::string alg = argv[1];
    const std::size_t n = std::stoul(argv[2]);
    // the reference's checkpoints are this rank's own; the MPI run's are shared by every rank
    const std::string ref_dir = "train_check_" + alg + "_ref_rank" + std::to_string(rank), mpi_dir = "train_check_" + alg + "_mpi";
    std::filesystem::remove_all(ref_dir);
    if (rank == 0) std::filesystem::remove_all(mpi_dir);
    MPI_Barrier(MPI_COMM_WORLD);
    sp::single_process one(n);
    std::vector<sp::round_status> ref_log, got_log, again_log;  // every round's progress report
    const auto ref = train(alg, n, ref_dir, "", ref_log, one);
    const double drop = alg == "sp-lossy" ? 0.3 : 0.0;
    sp::mpi_network net(MPI_COMM_WORLD, n, sp::mpi_options{std::chrono::milliseconds(20000), drop, 9});
    sp::mpi_process_group group(net);
    const auto got = train(alg, n, mpi_dir, "", got_log, group, net);
    std::string bad;
    auto expect = [&](bool ok, const std::string& what) { if (!ok) bad += std::string(bad.empty() ? "" : ", ") + what; };
    // the losses: every round in one process; over several ranks at evaluations and checkpoints only
    const bool several = group.ranks() > 1;
    expect(ref_log.size() == 24 && got_log.size() == 24, "24 progress reports");
    for (std::size_t k = 0; k < std::min(ref_log.size(), got_log.size()); ++k) {
      const auto& r = ref_log[k];
      const auto& g = got_log[k];
      const std::uint32_t t = g.round;
      const bool meet = t % 6 == 0 || t == 24 || t % 4 == 0;
      const std::string at = "round " + std::to_string(t) + ": ";
      expect(r.loss_known, at + "one process knows the loss");
      expect(g.loss_known == (meet || !several), at + (meet || !several ? "the loss known" : "no loss gathered"));
      if (g.loss_known) expect(same(g.loss, r.loss) && same(g.first_loss, r.first_loss), at + "the loss and first loss");
    }
    // resumed from the MPI run's last checkpoint (round 20), on a network and group of its own as
    // a restarted job would be: the uninterrupted result
    sp::mpi_network net2(MPI_COMM_WORLD, n, sp::mpi_options{std::chrono::milliseconds(20000), drop, 9});
    sp::mpi_process_group group2(net2);
    const auto again = train(alg, n, "", mpi_dir, again_log, group2, net2);
    expect(again.resumed_at == 20, "resumed at round 20");
    expect(again_log.size() == 4 && again_log.back().loss_known &&
               (!several || std::none_of(again_log.begin(), again_log.end() - 1,
                                         [](const sp::round_status& st) { return st.loss_known; })),
           "a resumed run's losses known at its last round only (over several ranks)");
    expect(same(again.first_loss, ref.first_loss) && same(again.loss, ref.loss), "a resumed run's losses");
    expect(same(again.eval.avg_node_accuracy, ref.eval.avg_node_accuracy) &&
               same(again.eval.parameter_divergence, ref.eval.parameter_divergence) &&
               again.report.bytes_sent == ref.report.bytes_sent && again.messages_sent == ref.messages_sent,
           "a resumed run's metrics and bytes");
    expect(same(got.eval.avg_node_accuracy, ref.eval.avg_node_accuracy), "average node accuracy");
    expect(same(got.eval.averaged_model_accuracy, ref.eval.averaged_model_accuracy), "averaged-model accuracy");
    expect(same(got.eval.parameter_divergence, ref.eval.parameter_divergence), "divergence");
    expect(got.report.bytes_sent == ref.report.bytes_sent, "bytes sent");
    expect(got.report.full_precision_bytes == ref.report.full_precision_bytes, "full-precision bytes");
    expect(got.messages_sent == ref.messages_sent, "messages sent");
    expect(got.messages_dropped == ref.messages_dropped, "messages dropped");
    expect(got.weight_mass.has_value() == ref.weight_mass.has_value() &&
               (!got.weight_mass || same(*got.weight_mass, *ref.weight_mass)), "weight mass");
    expect(got.bytes_after_training == ref.bytes_after_training, "bytes of the final phase");
    expect(same(got.first_loss, ref.first_loss) && same(got.loss, ref.loss), "losses");
    expect(drop == 0 || got.messages_dropped > 0, "some envelopes lost");
    if (!bad.empty()) {
      std::fprintf(stderr, "train_check: rank %d: %s %zu nodes: differs from one process in: %s\n", rank, alg.c_str(), n,
                   bad.c_str());
      rc = 1;
    }
    int all = 0;
    MPI_Allreduce(&rc, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    std::filesystem::remove_all(ref_dir);
    if (rank == 0 && all == 0) std::filesystem::remove_all(mpi_dir);
    if (all == 0 && rank == 0)
      std::printf("train_check: %s on %zu nodes: the trainer's metrics over MPI are bit-identical to one process: ok "
                  "(divergence %.17g, accuracy %.17g)\n", alg.c_str(), n, got.eval.parameter_divergence,
                  got.eval.avg_node_accuracy);
    rc = all;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_check: rank %d: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return rc;
}
