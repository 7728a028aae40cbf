// sparsepush-train: decentralized training of a small CNN/MLP on Fashion-MNIST with Sparse-Push,
// SCSP and the baselines, every node holding its own (optionally label-skewed) shard.
// Prints a live progress line, then a summary; writes a CSV log, a JSON summary and a gnuplot
// plot on request. Run `sparsepush-train --help` for the options; bad options exit with code 2,
// a diverging run with code 3 and a message saying which knob to turn.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <bit>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <algorithm>
#include <limits>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <type_traits>
#include <sparsepush/data/idx.hpp>
#include <sparsepush/nn/model.hpp>
#include <sparsepush/nn/optimizer.hpp>
#include <sparsepush/sparsepush.hpp>
#ifdef SPARSEPUSH_HAS_MPI
#include <sparsepush/transport/mpi.hpp>
#include "run_program.hpp"
#endif
#include <string>
#include <thread>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace sp = sparsepush;
using json = nlohmann::json;

namespace {

struct config {
  std::size_t nodes = 16;
  std::string schedule;  // default depends on the algorithm
  std::string algorithm = "scsp";
  std::string compressor = "top-k:0.01";
  std::string final_rounds = "auto";  // a count, or auto (from the schedule and final_tolerance)
  std::string final_compressor = "identity";
  double final_eta = -1;  // default depends on the final compressor
  double final_tolerance = 1e-3;
  double eta = -1;  // default depends on the compressor
  double skew = 0.8;
  double dirichlet = 0;  // > 0: Dirichlet(alpha) partition instead of skew
  std::string model = "cnn";
  std::string precision = "fp32";  // fp32 or int8 (8-bit simulated training)
  unsigned bits = 0;               // --bits: 4..16, 0 or 32 = full precision
  double epochs = 5;
  std::size_t batch = 32;
  double lr = 0.02;
  std::string lr_shape = "step";  // step (x0.1 at 3/4), cosine or constant
  std::uint32_t warmup = 0;
  bool nesterov = false;
  bool per_layer = false;
  double momentum = 0.9;
  double weight_decay = 1e-4;
  std::uint64_t seed = 1;
  std::size_t threads = 2;
  std::uint32_t eval_every = 0;  // 0: about 10 evaluations a run
  std::size_t eval_samples = 2000;
  std::size_t final_eval_samples = 0;  // 0: the whole test set
  std::string log, summary, plot;
  std::string data = sp::default_fashion_mnist_dir();
  double consensus_step = 0.5;  // CHOCO gamma_c
  std::string transport = "inprocess";
  double mpi_timeout = 60;  // seconds
  double drop_probability = 0;         // injected loss of each envelope
  std::string loss_recovery = "ack";   // none (plain push-sum) or ack (the sender keeps lost shares)
  std::string checkpoint, resume;      // directories
  std::uint32_t checkpoint_every = 0;  // 0: at every evaluation
};

/// Consensus step that keeps model compression stable (ALGORITHMS.md: about 0.01-0.02 at top-1%).
double default_eta(const std::string& spec) {
  const auto c = sp::parse_compressor(spec);
  if (std::holds_alternative<sp::identity>(c.get())) return 1.0;
  if (std::holds_alternative<sp::qsgd>(c.get())) return 0.2;
  if (std::holds_alternative<sp::scaled_sign>(c.get())) return 0.05;
  double f = 0.01;
  std::visit(
      [&](const auto& x) {
        if constexpr (requires { x.k; }) f = x.k.is_fraction() ? x.k.fraction_value() : 0.01;
      },
      c.get());
  return f >= 0.1 ? 0.1 : f >= 0.01 ? 0.02 : 0.01;
}

/// The value encoding of a final compressor that sends whole models (identity, whose values may
/// be rounded: +fp16, +bf16, +int8), or nothing for one that does not: a sparsifier, sign or QSGD,
/// which mix more slowly than the schedule's matrices show.
std::optional<sp::value_encoding> whole_model_values(const std::string& spec) {
  const auto compressor = sp::parse_compressor(spec);
  const auto* whole = std::get_if<sp::identity>(&compressor.get());
  if (!whole || whole->values.encoding == sp::value_encoding::sign || whole->values.encoding == sp::value_encoding::qsgd)
    return std::nullopt;
  return whole->values.encoding;
}

/// Everything the nodes compute with, as "key=value;" pairs: what every MPI rank must agree on and
/// what a checkpoint must have been written with to be resumed (threads and outputs excluded:
/// they do not change the results).
std::string settings_of(const config& c, std::size_t n, std::size_t d) {
  return "nodes=" + std::to_string(n) + ";dim=" + std::to_string(d) + ";schedule=" + c.schedule +
         ";algorithm=" + c.algorithm + ";compressor=" + c.compressor + ";eta=" + std::to_string(c.eta) +
         ";final=" + c.final_rounds + ";final_compressor=" + c.final_compressor +
         ";final_eta=" + std::to_string(c.final_eta) + ";final_tolerance=" + std::to_string(c.final_tolerance) + ";seed=" + std::to_string(c.seed) + ";model=" + c.model +
         ";epochs=" + std::to_string(c.epochs) + ";batch=" + std::to_string(c.batch) + ";lr=" + std::to_string(c.lr) +
         ";lr_schedule=" + c.lr_shape + ";warmup=" + std::to_string(c.warmup) + ";skew=" + std::to_string(c.skew) +
         ";dirichlet=" + std::to_string(c.dirichlet) + ";momentum=" + std::to_string(c.momentum) +
         ";nesterov=" + std::to_string(c.nesterov) + ";weight_decay=" + std::to_string(c.weight_decay) +
         ";per_layer=" + std::to_string(c.per_layer) + ";consensus_step=" + std::to_string(c.consensus_step) +
         ";data=" + c.data + ";drop=" + std::to_string(c.drop_probability) + ";recovery=" + c.loss_recovery +
         ";eval_every=" + std::to_string(c.eval_every) + ";eval_samples=" + std::to_string(c.eval_samples) + ";" +
         // the training precision; full precision adds nothing, so fp32 checkpoints written before
         // --bits existed still resume
         (c.bits ? "bits=" + std::to_string(c.bits) + ";" : std::string());
}

/// The keys whose values differ between two settings strings, as "key=a (now b)".
std::string settings_diff(const std::string& was, const std::string& now) {
  auto split = [](const std::string& s) {
    std::vector<std::pair<std::string, std::string>> kv;
    std::size_t at = 0;
    while (at < s.size()) {
      const std::size_t end = std::min(s.find(';', at), s.size());
      const std::string item = s.substr(at, end - at);
      const std::size_t eq = item.find('=');
      kv.emplace_back(item.substr(0, eq), eq == std::string::npos ? "" : item.substr(eq + 1));
      at = end + 1;
    }
    return kv;
  };
  const auto a = split(was), b = split(now);
  std::string out;
  for (const auto& [k, v] : a) {
    std::string nv = "(absent)";
    for (const auto& [k2, v2] : b)
      if (k2 == k) nv = v2;
    if (nv != v) out += (out.empty() ? "" : ", ") + k + "=" + v + " (now " + nv + ")";
  }
  for (const auto& [k, v] : b)  // keys only the new settings have (bits=8 against full precision)
    if (std::none_of(a.begin(), a.end(), [&](const auto& kv) { return kv.first == k; }))
      out += (out.empty() ? "" : ", ") + k + "=(absent) (now " + v + ")";
  return out.empty() ? "the settings differ" : out;
}

/// A checkpoint directory: DIR/manifest names the last complete checkpoint (its round, the
/// ranks that wrote it and the settings); DIR/round-R.rank-K.ckpt holds rank K's nodes.
std::string rank_file(const std::string& dir, std::uint32_t round, int rank) {
  return dir + "/round-" + std::to_string(round) + ".rank-" + std::to_string(rank) + ".ckpt";
}
struct manifest {
  std::uint32_t round = 0;
  std::uint32_t ranks = 1;
  std::string settings;
};
void write_manifest(const std::string& dir, const manifest& m) {
  sp::checkpoint_writer w;
  w.section("MANI");
  w.u32(m.round);
  w.u32(m.ranks);
  w.str(m.settings);
  const auto bytes = w.finish();
  sp::write_file_atomic(dir + "/manifest", bytes);
}
manifest read_manifest(const std::string& dir) {
  const std::string path = dir + "/manifest";
  const auto bytes = sp::read_file_bytes(path, 1 << 20);
  sp::checkpoint_reader r(bytes, path);
  r.section("MANI");
  manifest m;
  m.round = r.u32("round");
  m.ranks = r.u32("ranks");
  m.settings = r.str("settings", 1 << 16);
  r.done();
  return m;
}

bool symmetric_schedule(const std::string& s) {
  return s == "undirected-ring" || s == "complete" || s.rfind("torus", 0) == 0;
}

/// One node's shard and its own seeded minibatch order.
struct shard {
  std::vector<std::uint32_t> samples;
  std::vector<std::uint32_t> order;
  std::size_t cursor = 0;
  std::uint32_t epoch = 0;
  std::mt19937_64 gen;
  void next_batch(std::size_t batch, std::vector<std::uint32_t>& out) {
    out.clear();
    while (out.size() < batch) {
      if (cursor == order.size()) {
        order = samples;
        std::shuffle(order.begin(), order.end(), gen);
        cursor = 0;
        ++epoch;
      }
      out.push_back(order[cursor++]);
    }
  }
  /// Checkpoint the position in the data: order, cursor, epoch and the generator's state.
  void save(sp::checkpoint_writer& w) const {
    w.section("SHRD");
    w.values(order);
    w.u64(cursor);
    w.u32(epoch);
    std::ostringstream g;
    g << gen;
    w.str(g.str());
  }
  /// The saved position (checked: the same samples, a cursor inside them) as a new shard.
  shard read(sp::checkpoint_reader& r) const {
    r.section("SHRD");
    shard s;
    s.samples = samples;
    s.order = r.values<std::uint32_t>("data order", samples.size());
    std::vector<std::uint32_t> a = s.order, b = samples;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    if (a != b) r.fail("holds a data order that is not this node's shard (other data or partition?)");
    s.cursor = static_cast<std::size_t>(r.u64("data cursor"));
    if (s.cursor > s.order.size()) r.fail("holds a data cursor past the end of the shard");
    s.epoch = r.u32("data epoch");
    std::istringstream g(r.str("generator state", 1 << 16));
    g >> s.gen;
    if (!g) r.fail("holds a generator state that does not parse");
    return s;
  }
};

struct evaluation {
  double avg_node_accuracy = 0, averaged_model_accuracy = 0;
};

/// Where the nodes run: all in this process, or this rank's block of an MPI run. Rank 0 gathers
/// what it reports, in node order, so that it computes exactly what one process would.
struct cluster {
  int rank = 0, ranks = 1;
  std::size_t first = 0, local = 0, n = 0;
#ifdef SPARSEPUSH_HAS_MPI
  MPI_Comm comm = MPI_COMM_NULL;
#endif
  bool mpi() const { return ranks > 1 || mpi_run; }
  bool root() const { return rank == 0; }
  bool mpi_run = false;

  /// Every node's value on every rank, from the local block's values.
  std::vector<double> allgather(const std::vector<double>& mine) const {
#ifdef SPARSEPUSH_HAS_MPI
    if (mpi_run) {
      std::vector<int> counts, displs;
      layout(counts, displs, 1);
      std::vector<double> all(n);
      MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), counts.data(), displs.data(),
                     MPI_DOUBLE, comm);
      return all;
    }
#endif
    return mine;
  }
  /// Every node's model on rank 0 (empty elsewhere), from the local block's models.
  std::vector<std::vector<float>> gather_models(std::vector<std::vector<float>> mine, std::size_t d) const {
#ifdef SPARSEPUSH_HAS_MPI
    if (mpi_run) {
      std::vector<float> flat;
      for (const auto& m : mine) flat.insert(flat.end(), m.begin(), m.end());
      std::vector<int> counts, displs;
      layout(counts, displs, d);
      std::vector<float> all(root() ? n * d : 0);
      MPI_Gatherv(flat.data(), static_cast<int>(flat.size()), MPI_FLOAT, all.data(), counts.data(), displs.data(),
                  MPI_FLOAT, 0, comm);
      std::vector<std::vector<float>> out;
      if (root())
        for (std::size_t i = 0; i < n; ++i) out.emplace_back(all.begin() + i * d, all.begin() + (i + 1) * d);
      return out;
    }
#endif
    (void)d;
    return mine;
  }
  /// The sum over ranks, on every rank.
  std::size_t sum(std::size_t mine) const {
#ifdef SPARSEPUSH_HAS_MPI
    if (mpi_run) {
      unsigned long long v = mine, all = 0;
      MPI_Allreduce(&v, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm);
      return static_cast<std::size_t>(all);
    }
#endif
    return mine;
  }
  /// Rank 0's value on every rank.
  int broadcast(int v) const {
#ifdef SPARSEPUSH_HAS_MPI
    if (mpi_run) MPI_Bcast(&v, 1, MPI_INT, 0, comm);
#endif
    return v;
  }
  std::uint32_t broadcast(std::uint32_t v) const {
#ifdef SPARSEPUSH_HAS_MPI
    if (mpi_run) MPI_Bcast(&v, 1, MPI_UINT32_T, 0, comm);
#endif
    return v;
  }

 private:
#ifdef SPARSEPUSH_HAS_MPI
  void layout(std::vector<int>& counts, std::vector<int>& displs, std::size_t per_node) const {
    std::vector<int> firsts(static_cast<std::size_t>(ranks) + 1);
    const int f = static_cast<int>(first), l = static_cast<int>(local);
    std::vector<int> pair{f, l}, all(2 * static_cast<std::size_t>(ranks));
    MPI_Allgather(pair.data(), 2, MPI_INT, all.data(), 2, MPI_INT, comm);
    counts.resize(static_cast<std::size_t>(ranks));
    displs.resize(counts.size());
    for (std::size_t r = 0; r < counts.size(); ++r) {
      counts[r] = all[2 * r + 1] * static_cast<int>(per_node);
      displs[r] = all[2 * r] * static_cast<int>(per_node);
    }
  }
#endif
};

}  // namespace

int main(int argc, char** argv) {
  config c;
  CLI::App app{"sparsepush-train: decentralized training on Fashion-MNIST with Sparse-Push, SCSP and baselines"};
  app.add_option("--nodes", c.nodes, "number of nodes, 2 to 4096")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--schedule", c.schedule,
                 "communication schedule: directed-ring, undirected-ring, torus:RxC, complete, time-varying-ring[:hops], "
                 "alternating-ring, exponential[:K], bidirectional-exponential, erdos-renyi:P, random:K "
                 "(default: time-varying-ring; undirected-ring for dpsgd, deepsqueeze, choco)");
  app.add_option("--algorithm", c.algorithm, "sp, scsp, sgp, dpsgd, deepsqueeze, choco or centralized")
      ->check(CLI::IsMember({"sp", "scsp", "sgp", "dpsgd", "deepsqueeze", "choco", "centralized"}))
      ->capture_default_str();
  app.add_option("--compressor", c.compressor, "compressor spec, e.g. top-k:0.01, top-k:0.001+int8, random-k:0.01, qsgd:16, sign")
      ->capture_default_str();
  app.add_option("--final-rounds", c.final_rounds,
                 "SCSP: gossip rounds at the end, a count or auto: the fewest that bring every node within "
                 "--final-tolerance of the average, computed from the schedule (the exact count where the graph "
                 "averages exactly: 4 for 16 nodes on the default time-varying ring)")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return {};
        std::uint64_t k = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), k);
        if (ec != std::errc() || end != v.data() + v.size() || k == 0 || k > 4294967295u)
          return "--final-rounds must be auto or a count in [1, 4294967295], got " + v;
        return {};
      })
      ->capture_default_str();
  app.add_option("--final-compressor", c.final_compressor,
                 "SCSP: compressor of the final rounds, e.g. identity+bf16 or top-k:0.1+int8 (identity: exact)")
      ->capture_default_str();
  app.add_option("--final-eta", c.final_eta, "SCSP: consensus step of the final rounds (default from the final compressor)");
  app.add_option("--final-tolerance", c.final_tolerance,
                 "SCSP with --final-rounds auto: every de-biased model ends within this fraction of the largest "
                 "distance to the average at the start of the final rounds")
      ->check(CLI::Range(1e-12, 0.5))->capture_default_str();
  app.add_option("--eta", c.eta, "consensus step in (0, 1] (default from the compressor: 0.02 at top-1%, 0.1 at top-10%, 1 for identity)");
  app.add_option("--consensus-step", c.consensus_step, "CHOCO gamma_c in (0, 1]")->capture_default_str();
  auto* skew = app.add_option("--skew", c.skew, "label skew in [0, 1] (Hsieh et al.)")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--dirichlet", c.dirichlet, "Dirichlet(alpha) label partition instead of --skew")->check(CLI::PositiveNumber)->excludes(skew);
  app.add_option("--model", c.model, "mlp, cnn, cnn_evonorm or cnn_range_evonorm")
      ->check(CLI::IsMember(sp::nn::model::known_names()))->capture_default_str();
  auto* precision = app.add_option("--precision", c.precision,
                                   "fp32, or int8: weights, activations and gradients at 8 bits (simulated)")
                        ->check(CLI::IsMember({"fp32", "int8"}))->capture_default_str();
  auto* bits = app.add_option("--bits", c.bits, "simulated training precision, 4 to 16 bits (0 or 32: full precision)")
                   ->check(CLI::Range(0u, 32u));
  app.add_option("--epochs", c.epochs, "epochs over each node's shard")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch", c.batch, "minibatch per node")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--lr", c.lr, "learning rate (divided by 10 for the last quarter)")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--lr-schedule", c.lr_shape, "step (x0.1 for the last quarter), cosine or constant")
      ->check(CLI::IsMember({"step", "cosine", "constant"}))->capture_default_str();
  app.add_option("--warmup", c.warmup, "rounds of linear learning-rate warm-up")->capture_default_str();
  app.add_flag("--nesterov", c.nesterov, "Nesterov momentum");
  app.add_flag("--per-layer", c.per_layer, "top-K per layer (the same fraction of every layer) instead of global");
  app.add_option("--momentum", c.momentum, "SGD momentum on the numerator")->check(CLI::Range(0.0, 0.999))->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "L2 weight decay")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_option("--seed", c.seed, "seed of data partition, init, batches and compressors")->capture_default_str();
  app.add_option("--threads", c.threads, "worker threads (results do not depend on it)")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_option("--eval-every", c.eval_every, "rounds between evaluations (0: about 10 a run)");
  app.add_option("--final-eval-samples", c.final_eval_samples,
                 "test images used by the final evaluation (0: all of them; fewer keeps very large runs short)")
      ->check(CLI::Range(0, 10000))
      ->capture_default_str();
  app.add_option("--eval-samples", c.eval_samples, "test images used by periodic evaluations (the final one uses all)")
      ->check(CLI::Range(1, 10000))->capture_default_str();
  app.add_option("--log", c.log, "CSV log file");
  app.add_option("--summary", c.summary, "JSON summary file");
  app.add_option("--plot", c.plot, "PNG plot (gnuplot): test accuracy and divergence vs rounds and vs megabytes");
  app.add_option("--data", c.data, "directory with the Fashion-MNIST .gz files")->capture_default_str();
  app.add_option("--transport", c.transport,
                 "inprocess (all nodes in this process) or mpi (under mpirun -np R: each rank runs a block of "
                 "the nodes; rank 0 reports)")
      ->check(CLI::IsMember({"inprocess", "mpi"}))->capture_default_str();
  app.add_option("--drop-probability", c.drop_probability,
                 "inject message loss: each envelope is lost with this probability in [0, 1) (in-process and MPI alike)")
      ->capture_default_str();
  app.add_option("--loss-recovery", c.loss_recovery,
                 "ack: a sender keeps the shares of its lost envelopes (mass conserved); none: plain push-sum")
      ->check(CLI::IsMember({"ack", "none"}))->capture_default_str();
  app.add_option("--checkpoint", c.checkpoint,
                 "directory for crash-safe checkpoints of every node's state (created if missing)");
  app.add_option("--checkpoint-every", c.checkpoint_every, "rounds between checkpoints (0: at every evaluation)")
      ->capture_default_str();
  app.add_option("--resume", c.resume,
                 "continue the run checkpointed in this directory (same settings; checkpoints go on there "
                 "unless --checkpoint names another)");
  app.add_option("--mpi-timeout", c.mpi_timeout, "seconds a rank waits for a missing message before it stops the run")
      ->check(CLI::PositiveNumber)->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  // --precision and --bits: one training precision (0: full precision)
  {
    const unsigned from_precision = c.precision == "int8" ? 8 : 0;
    if (bits->count() && c.bits == 32) c.bits = 0;
    if (bits->count() && c.bits != 0 && (c.bits < 4 || c.bits > 16)) {
      std::fprintf(stderr, "sparsepush-train: --bits %u: simulated precision must be 4 to 16 bits (0 or 32: full precision)\n",
                   c.bits);
      return 2;
    }
    if (bits->count() && precision->count() && c.bits != from_precision) {
      std::fprintf(stderr, "sparsepush-train: --precision %s and --bits %u conflict (int8 is --bits 8, fp32 is --bits 0)\n",
                   c.precision.c_str(), c.bits);
      return 2;
    }
    if (!bits->count()) c.bits = from_precision;
  }

  // --transport mpi: every rank runs this program with the same options; rank 0 reports.
  cluster cl;
#ifdef SPARSEPUSH_HAS_MPI
  struct mpi_session {
    bool on = false;
    ~mpi_session() {
      if (on) MPI_Finalize();
    }
  } session;
  if (c.transport == "mpi") {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    session.on = true;
    cl.mpi_run = true;
    cl.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(cl.comm, &cl.rank);
    MPI_Comm_size(cl.comm, &cl.ranks);
  }
#else
  if (c.transport == "mpi") {
    std::fprintf(stderr, "sparsepush-train: --transport mpi: this build has no MPI (install libopenmpi-dev and rebuild)\n");
    return 2;
  }
#endif
  // Under MPI a failure on one rank stops every rank (the others could wait in a collective).
  auto fail = [&](int code) {
#ifdef SPARSEPUSH_HAS_MPI
    if (cl.mpi_run && cl.ranks > 1) {
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, code);
    }
#endif
    return code;
  };

  try {
    if (c.nodes < 2)
      throw sp::config_error("--nodes must be at least 2: one node has no one to gossip with, and its run would be "
                             "plain SGD (the library runs a single node that way; here use --nodes 2 or more)");
    if (c.schedule.empty())
      c.schedule = (c.algorithm == "dpsgd" || c.algorithm == "deepsqueeze" || c.algorithm == "choco") ? "undirected-ring"
                                                                                                         : "time-varying-ring";
    if ((c.algorithm == "dpsgd" || c.algorithm == "deepsqueeze" || c.algorithm == "choco") && !symmetric_schedule(c.schedule)) {
      if (cl.root())
        std::fprintf(stderr, "sparsepush-train: --algorithm %s needs a symmetric doubly stochastic schedule: "
                     "--schedule undirected-ring, torus:RxC or complete (got %s)\n", c.algorithm.c_str(), c.schedule.c_str());
      return 2;
    }
    if (cl.mpi_run && c.algorithm == "centralized")
      throw sp::config_error("--algorithm centralized runs in one process only (--transport inprocess)");
    if (!(c.drop_probability >= 0 && c.drop_probability < 1))
      throw sp::config_error("--drop-probability must be in [0, 1), got " + std::to_string(c.drop_probability));
    if (c.drop_probability > 0 && (c.algorithm == "centralized" || c.algorithm == "choco"))
      throw sp::config_error("--drop-probability: " + c.algorithm +
                             (c.algorithm == "choco" ? " needs every message delivered (its nodes keep copies of their "
                                                       "neighbours' models, which a lost message would corrupt)"
                                                     : " sends no messages"));
    if (!c.plot.empty() && c.log.empty())
      throw sp::config_error("--plot needs --log (the plot is drawn from the CSV log)");
    if (c.algorithm == "sgp" || c.algorithm == "dpsgd" || c.algorithm == "centralized") c.compressor = "identity";
    sp::parse_compressor(c.compressor);  // validate early: a config_error exits with 2 below
    if (c.eta < 0) c.eta = c.algorithm == "sgp" || c.algorithm == "dpsgd" ? 1.0 : default_eta(c.compressor);
    // --final-rounds was always accepted (and unused) by the other algorithms: scripts keep working
    for (const char* option : {"--final-compressor", "--final-eta", "--final-tolerance"})
      if (c.algorithm != "scsp" && app.count(option) > 0)
        throw sp::config_error(std::string(option) + " sets SCSP's final rounds; --algorithm " + c.algorithm +
                               " has none (use --algorithm scsp)");
    if (c.algorithm == "scsp") {
      sp::parse_compressor(c.final_compressor);
      if (c.final_eta < 0) c.final_eta = default_eta(c.final_compressor);
      if (!(c.final_eta > 0 && c.final_eta <= 1)) throw sp::config_error("--final-eta must be in (0, 1]");
      if (c.final_rounds == "auto" && !whole_model_values(c.final_compressor))
        throw sp::config_error("--final-rounds auto counts rounds that send whole models (identity, or identity+fp16, "
                               "+bf16 or +int8); --final-compressor " + c.final_compressor +
                               " mixes more slowly than the schedule shows: give --final-rounds N");
      if (c.final_rounds != "auto" && app.count("--final-tolerance") > 0)
        throw sp::config_error("--final-tolerance sets the target of --final-rounds auto; --final-rounds " +
                               c.final_rounds + " gives the count itself");
    } else if (app.count("--final-rounds") > 0 && cl.root()) {
      // accepted and unused, as it always was, so scripts keep working; but say so
      std::fprintf(stderr, "sparsepush-train: warning: --final-rounds is SCSP's; --algorithm %s runs no final rounds\n",
                   c.algorithm.c_str());
    }
    if (!(c.eta > 0 && c.eta <= 1)) throw sp::config_error("--eta must be in (0, 1]");
    // CLI11's range checks let NaN through, and from_chars reads "inf": every number must be finite
    const std::pair<const char*, double> numbers[] = {
        {"--epochs", c.epochs}, {"--lr", c.lr}, {"--skew", c.skew}, {"--dirichlet", c.dirichlet},
        {"--momentum", c.momentum}, {"--weight-decay", c.weight_decay}, {"--consensus-step", c.consensus_step},
        {"--mpi-timeout", c.mpi_timeout}, {"--drop-probability", c.drop_probability}};
    for (const auto& [option, v] : numbers)
      if (!std::isfinite(v)) throw sp::config_error(std::string(option) + " must be a finite number, got " + std::to_string(v));
    // Output files are checked before any work, not after the run: each must be writable
    // (a directory, a missing folder or a read-only place is an error now).
    if (cl.root())
      for (const auto& [option, path] : {std::pair<const char*, std::string>{"--log", c.log}, {"--summary", c.summary},
                                         {"--plot", c.plot}, {"--plot", c.plot.empty() ? "" : c.plot + ".gp"}}) {
        if (path.empty()) continue;
        std::ofstream probe(path, std::ios::app);
        if (!probe) throw sp::config_error(std::string("cannot write ") + option + " " + path);
      }
    // Checkpoints: --resume DIR continues there unless --checkpoint names another directory;
    // the directory is created and must be writable now, not at the first checkpoint.
    if (c.checkpoint_every > 0 && c.checkpoint.empty() && c.resume.empty())
      throw sp::config_error("--checkpoint-every needs --checkpoint DIR");
    if (c.checkpoint.empty()) c.checkpoint = c.resume;
    if (!c.checkpoint.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(c.checkpoint, ec);
      if (!std::filesystem::is_directory(c.checkpoint))
        throw sp::config_error("cannot create the --checkpoint directory " + c.checkpoint +
                               (ec ? ": " + ec.message() : std::string()));
      const std::string probe = c.checkpoint + "/.write-probe";
      std::ofstream p(probe);
      if (!p) throw sp::config_error("cannot write in the --checkpoint directory " + c.checkpoint);
      p.close();
      std::filesystem::remove(probe, ec);
    }
    if (!c.resume.empty() && cl.root() && !std::filesystem::exists(c.resume + "/manifest"))
      throw sp::config_error("--resume " + c.resume + ": no checkpoint there (" + c.resume + "/manifest is missing)");
    if (c.mpi_timeout * 1000 > static_cast<double>(std::numeric_limits<std::int32_t>::max()))
      throw sp::config_error("--mpi-timeout " + std::to_string(c.mpi_timeout) + " is too long (at most 2147483 seconds)");
  } catch (const sp::error& e) {
    if (cl.root()) std::fprintf(stderr, "sparsepush-train: %s\n", e.what());
    return 2;
  }

  try {
    const auto t_start = std::chrono::steady_clock::now();
    const auto fm = sp::load_fashion_mnist(c.data);
    const auto net = sp::nn::model::make(c.model, 1, fm.train.rows, fm.train.cols, 10);
    const std::size_t in = net.input_size(), d = net.num_params(), n = c.nodes;
    cl.n = n;
    cl.local = n;
#ifdef SPARSEPUSH_HAS_MPI
    std::unique_ptr<sp::mpi_network> mpi_net;
    if (cl.mpi_run) {
      mpi_net = std::make_unique<sp::mpi_network>(
          MPI_COMM_WORLD, n,
          sp::mpi_options{std::chrono::milliseconds(static_cast<long>(c.mpi_timeout * 1000)), c.drop_probability, c.seed});
      cl.first = mpi_net->first_node();
      cl.local = mpi_net->local_nodes();
      // every rank must run the same thing: whatever the nodes compute with
      mpi_net->agree(settings_of(c, n, d));
    }
#endif
    const sp::partition parts = c.dirichlet > 0 ? sp::partition_dirichlet(fm.train.labels, n, c.dirichlet, c.seed)
                                                : sp::partition_skewed(fm.train.labels, n, c.skew, c.seed);
    std::vector<shard> shards(n);
    std::size_t min_shard = fm.train.count;
    for (std::size_t i = 0; i < n; ++i) {
      shards[i].samples = parts[i];
      shards[i].order = parts[i];
      shards[i].cursor = parts[i].size();  // shuffle on first use
      shards[i].gen.seed(c.seed * 1000003u + i);
      min_shard = std::min(min_shard, parts[i].size());
    }
    if (min_shard == 0) throw sp::config_error("a node received no training samples; raise --dirichlet alpha or use fewer nodes");
    const std::size_t per_node = fm.train.count / n;
    // rounds are 32-bit: check the arithmetic before converting (a huge --epochs or
    // --final-rounds would wrap around or be undefined)
    const bool scsp = c.algorithm == "scsp";
    constexpr double max_rounds = std::numeric_limits<std::uint32_t>::max();
    const double want = std::max(1.0, std::round(c.epochs * static_cast<double>(per_node) / static_cast<double>(c.batch)));
    if (want > max_rounds)
      throw sp::config_error("--epochs " + std::to_string(c.epochs) + " gives " + std::to_string(want) +
                             " rounds, more than the 4294967295 a run can count");
    const auto train_rounds = static_cast<std::uint32_t>(want);
    // SCSP's final rounds: the count given, or (auto) the fewest exact rounds from round
    // train_rounds after which every de-biased model is within --final-tolerance of the average
    std::uint32_t final_rounds = 0;
    sp::final_rounds_plan final_plan;
    if (scsp && c.final_rounds == "auto") {
      final_plan = sp::final_rounds_for(sp::parse_schedule(c.schedule, n, c.seed), train_rounds, c.final_tolerance,
                                        100000, c.final_eta);
      final_rounds = final_plan.rounds;
    } else if (scsp) {
      final_rounds = static_cast<std::uint32_t>(std::stoull(c.final_rounds));
    }
    if (scsp && static_cast<double>(train_rounds) + final_rounds > max_rounds)
      throw sp::config_error("--final-rounds " + std::to_string(final_rounds) + " after " + std::to_string(train_rounds) +
                             " training rounds exceeds the 4294967295 rounds a run can count");
    if (c.warmup > train_rounds)
      throw sp::config_error("--warmup " + std::to_string(c.warmup) + " is longer than the " +
                             std::to_string(train_rounds) + " training rounds");
    const std::uint32_t rounds = train_rounds + final_rounds;
    const std::uint32_t eval_every = c.eval_every ? c.eval_every : std::max<std::uint32_t>(1, rounds / 10);

    std::vector<float> init(d);
    net.init(init, c.seed);
    std::vector<std::vector<float>> x0(cl.local, init);  // this process's nodes (moved into the algorithm)

    // Per-node state (this process's nodes): the momentum buffer, which is also the local
    // direction p_i for heavy-ball momentum (Nesterov needs a buffer of its own); everything else
    // a local step needs is scratch, one per thread: 1024 MLP nodes hold 3 d floats each (x, e
    // and momentum), not 6.
    const sp::nn::sgd opt{c.momentum, c.nesterov, c.weight_decay};
    std::vector<std::vector<float>> velocity(cl.local, std::vector<float>(d, 0.0f));
    std::vector<std::vector<float>> nesterov_dirs(c.nesterov ? cl.local : 0, std::vector<float>(d));
    std::vector<double> last_loss(n, 0.0);
    struct scratch {
      std::vector<float> xh, grad, images;
      std::vector<std::uint8_t> labels;
      std::vector<std::uint32_t> batch_idx;
      sp::nn::workspace ws;  // training scratch (batch --batch)
    };
    std::deque<scratch> work;  // one per thread that runs nodes (a deque: growing keeps references)
    auto scratch_for_slot = [&](scratch& s) -> scratch& {
      if (s.grad.size() != d) {
        s.xh.resize(d);
        s.grad.resize(d);
        s.images.resize(c.batch * in);
        s.labels.resize(c.batch);
      }
      return s;
    };
    // evaluation scratch (the inference path: two activations of a few images): one per thread
    std::vector<sp::nn::workspace> eval_ws(std::max<std::size_t>(1, c.threads));
    // p_i of node i (global index) at `model` into `direction`: the next minibatch of its shard,
    // the gradient, then momentum (velocity updated; direction may be the velocity itself).
    auto local_direction = [&](std::uint32_t i, std::uint32_t round, std::span<const float> model,
                               std::span<float> direction, scratch& s) {
      shards[i].next_batch(c.batch, s.batch_idx);
      for (std::size_t b = 0; b < c.batch; ++b) {
        const std::uint32_t k = s.batch_idx[b];
        std::copy_n(fm.train.pixels.data() + std::size_t{k} * in, in, s.images.data() + b * in);
        s.labels[b] = fm.train.labels[k];
      }
      const sp::nn::quantization q{c.bits, c.seed, i, round};  // bits 0: the full-precision step
      last_loss[i] = net.loss_and_grad(model, s.images.data(), s.labels.data(), c.batch, s.grad, s.ws, q);
      opt.direction(s.grad, model, velocity[i - cl.first], direction);
    };
    // CHOCO and centralized call an oracle from their threads: each call borrows a free scratch
    std::mutex free_mu;
    std::vector<std::size_t> free_slots;
    const sp::gradient_oracle<float> oracle = [&](std::uint32_t i, std::uint32_t round, std::span<const float> model,
                                                  std::span<float> direction) {
      std::size_t w = 0;
      {
        std::lock_guard lock(free_mu);
        if (free_slots.empty()) {
          free_slots.push_back(work.size());
          work.emplace_back();
        }
        w = free_slots.back();
        free_slots.pop_back();
      }
      struct give_back {
        std::mutex& mu;
        std::vector<std::size_t>& slots;
        std::size_t w;
        ~give_back() {
          std::lock_guard lock(mu);
          slots.push_back(w);
        }
      } back{free_mu, free_slots, w};
      scratch* s = nullptr;
      {
        std::lock_guard lock(free_mu);  // another thread may be adding a slot
        s = &work[w];
      }
      local_direction(i, round, model, direction, scratch_for_slot(*s));
    };
    // One round: Sparse-Push and its configurations take the directions from the nodes' own
    // buffers (no copy per node), computed on the algorithm's threads; the others use the oracle.
    std::vector<std::span<const float>> dir_views;
    auto step = [&](auto& alg, std::uint32_t t, double gamma) {
      if constexpr (requires { alg.trains(t); alg.workers(); }) {
        if (!alg.trains(t)) {
          alg.round(t, std::span<const std::span<const float>>(), gamma);
          return;
        }
        if (work.size() < alg.workers()) work.resize(alg.workers());
        alg.for_each_node([&](std::size_t li, std::size_t w) {
          scratch& s = scratch_for_slot(work[w]);
          alg.model(li, s.xh);
          std::span<float> out = c.nesterov ? std::span<float>(nesterov_dirs[li]) : std::span<float>(velocity[li]);
          local_direction(static_cast<std::uint32_t>(cl.first + li), t, s.xh, out, s);
        });
        dir_views.clear();
        for (std::size_t li = 0; li < cl.local; ++li)
          dir_views.emplace_back(c.nesterov ? nesterov_dirs[li] : velocity[li]);
        alg.round(t, std::span<const std::span<const float>>(dir_views), gamma);
      } else {
        alg.round(t, oracle, gamma);
      }
    };
    sp::nn::lr_schedule schedule_lr;
    schedule_lr.base = c.lr;
    schedule_lr.warmup = c.warmup;
    schedule_lr.shape = c.lr_shape == "cosine" ? sp::nn::lr_schedule::kind::cosine
                        : c.lr_shape == "constant" ? sp::nn::lr_schedule::kind::constant
                                                   : sp::nn::lr_schedule::kind::step;
    auto lr = [&](std::uint32_t t) { return schedule_lr.at(std::min(t, train_rounds - 1), train_rounds); };

    // Evaluation of the nodes' models (in parallel, one workspace each) and of their average.
    // The inference path (forward only, no backward caches): the training pass's logits, bit for bit.
    // FNV-1a over a model's bytes: a cheap first test of two models being the same bits
    auto model_hash = [](std::span<const float> m) {
      std::uint64_t h = 1469598103934665603ull;
      for (const float v : m) {
        h ^= std::bit_cast<std::uint32_t>(v);
        h *= 1099511628211ull;
      }
      return h;
    };
    auto accuracy = [&](std::span<const float> params, std::size_t samples, sp::nn::workspace& w) {
      const std::size_t right = net.count_correct(params, fm.test.pixels.data(), fm.test.labels.data(), samples, w);
      return static_cast<double>(right) / static_cast<double>(samples);
    };
    // Each process evaluates its own nodes, one model per thread at a time. In one process the
    // averaged model and the divergence stream the models in node order (O(d) memory, not
    // O(n d)); under MPI rank 0 gathers the models (node order) and computes the same values.
    auto evaluate = [&](const auto& alg, std::size_t samples, double& divergence) {
      evaluation ev;
      const std::size_t ln = alg.num_nodes();
      std::vector<double> local_acc(ln);
      // Nodes whose de-biased models are the same bits (after SCSP's exact gossip rounds, all of
      // them) answer the same: each distinct model is evaluated once (equal hashes are confirmed
      // byte by byte), the distinct ones spread over the threads.
      std::vector<std::size_t> same_as(ln);
      std::vector<std::uint64_t> hashes(ln);
      std::vector<std::size_t> distinct;
      {
        std::vector<float> m(d), other(d);
        for (std::size_t i = 0; i < ln; ++i) {
          alg.model(i, std::span<float>(m));
          hashes[i] = model_hash(m);
          same_as[i] = i;
          for (const std::size_t j : distinct) {
            if (hashes[j] != hashes[i]) continue;
            alg.model(j, std::span<float>(other));
            if (std::memcmp(m.data(), other.data(), d * sizeof(float)) == 0) {
              same_as[i] = j;
              break;
            }
          }
          if (same_as[i] == i) distinct.push_back(i);
        }
      }
      {
        std::vector<std::jthread> workers;  // distinct model k on thread k mod threads
        for (std::size_t t = 0; t < std::min(c.threads, distinct.size()); ++t)
          workers.emplace_back([&, t] {
            std::vector<float> m(d);
            for (std::size_t k = t; k < distinct.size(); k += c.threads) {
              alg.model(distinct[k], std::span<float>(m));
              local_acc[distinct[k]] = accuracy(m, samples, eval_ws[t]);
            }
          });
      }
      for (std::size_t i = 0; i < ln; ++i) local_acc[i] = local_acc[same_as[i]];
      const std::vector<double> acc = cl.allgather(local_acc);
      std::vector<float> avg(d, 0.0f);
      if (cl.mpi_run) {
        std::vector<std::vector<float>> models(ln, std::vector<float>(d));
        for (std::size_t i = 0; i < ln; ++i) alg.model(i, std::span<float>(models[i]));
        const auto all_models = cl.gather_models(std::move(models), d);
        if (!cl.root()) return ev;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t l = 0; l < d; ++l) avg[l] += all_models[i][l] / static_cast<float>(n);
        divergence = sp::parameter_divergence(all_models);
      } else {
        std::vector<float> m(d);
        for (std::size_t i = 0; i < n; ++i) {
          alg.model(i, std::span<float>(m));
          for (std::size_t l = 0; l < d; ++l) avg[l] += m[l] / static_cast<float>(n);
        }
        divergence = sp::parameter_divergence_of<float>(n, d, [&](std::size_t i, std::span<float> out) { alg.model(i, out); });
      }
      for (std::size_t i = 0; i < n; ++i) ev.avg_node_accuracy += acc[i] / static_cast<double>(n);
      // the averaged model, unless it is the bits of a node model this process evaluated
      const std::uint64_t avg_hash = model_hash(avg);
      std::optional<double> known;
      if (!cl.mpi_run) {
        std::vector<float> m(d);
        for (const std::size_t j : distinct) {
          if (hashes[j] != avg_hash) continue;
          alg.model(j, std::span<float>(m));
          if (std::memcmp(m.data(), avg.data(), d * sizeof(float)) == 0) {
            known = local_acc[j];
            break;
          }
        }
      }
      ev.averaged_model_accuracy = known ? *known : accuracy(avg, samples, eval_ws[0]);
      return ev;
    };
    // The trainer's report over every node (rank 0 has the divergence; bytes summed).
    auto report = [&](const auto& alg, std::uint32_t t, double divergence) {
      const std::size_t bytes = cl.sum(alg.bytes_sent());  // collectives: the same order on every rank
      const std::size_t fp_bytes = cl.sum(alg.full_precision_bytes());
      return sp::round_report::of(t, cl.root() ? divergence : 0.0, bytes, fp_bytes);
    };

    // --resume: rank 0 reads the manifest (the last complete checkpoint) and tells every rank its
    // round; each rank then restores its own file in run().
    const std::string settings = settings_of(c, n, d);
    std::uint32_t resume_round = 0;
    if (!c.resume.empty()) {
      int ok = 1;
      std::string why;
      if (cl.root()) {
        try {
          const manifest m = read_manifest(c.resume);
          if (m.settings != settings)
            throw sp::checkpoint_error("--resume " + c.resume + " was written with other settings: " +
                                       settings_diff(m.settings, settings));
          if (m.ranks != static_cast<std::uint32_t>(cl.ranks))
            throw sp::checkpoint_error("--resume " + c.resume + " was written by " + std::to_string(m.ranks) +
                                       " rank(s), this run has " + std::to_string(cl.ranks));
          if (m.round == 0 || m.round >= rounds)
            throw sp::checkpoint_error("--resume " + c.resume + " holds round " + std::to_string(m.round) +
                                       ", outside this run's 1.." + std::to_string(rounds - 1));
          resume_round = m.round;
        } catch (const sp::error& e) {
          ok = 0;
          why = e.what();
        }
      }
      if (!cl.broadcast(ok)) {
        if (cl.root()) throw sp::checkpoint_error(why.substr(std::string("sparsepush: ").size()));
        return 2;  // rank 0 reports and aborts the job
      }
      resume_round = cl.broadcast(resume_round);
    }
    const char* log_header =
        "round,epoch,phase,loss,avg_test_accuracy,averaged_model_test_accuracy,param_divergence,bytes_sent,mb_sent,"
        "comm_ratio,wall_seconds";
    std::ofstream log;
    if (!c.log.empty() && cl.root()) {
      // a resumed run keeps the log's rows up to its checkpoint and appends the rest
      std::vector<std::string> kept;
      if (resume_round > 0) {
        std::ifstream old(c.log);
        std::string line;
        for (bool first = true; std::getline(old, line); first = false) {
          if (first) continue;
          if (std::strtoull(line.c_str(), nullptr, 10) <= resume_round) kept.push_back(line);
        }
      }
      log.open(c.log);
      if (!log) throw sp::data_error("cannot write the log file " + c.log);
      log << log_header << '\n';
      for (const auto& line : kept) log << line << '\n';
    }
    const bool tty = isatty(fileno(stdout)) && !cl.mpi_run;  // mpirun forwards a pty: plain lines there
    if (cl.root())
      std::printf("sparsepush-train: %s on %zu nodes, schedule %s, compressor %s, eta %g, model %s (%zu parameters), "
                "%s %g, %u rounds (%.2f epochs) of batch %zu\n",
                c.algorithm.c_str(), n, c.schedule.c_str(), c.compressor.c_str(), c.eta, c.model.c_str(), d,
                c.dirichlet > 0 ? "dirichlet" : "skew", c.dirichlet > 0 ? c.dirichlet : c.skew, rounds,
                static_cast<double>(train_rounds) * c.batch / per_node, c.batch);
    if (cl.root() && scsp) {
      std::printf("sparsepush-train: SCSP's last %u rounds gossip with %s, eta %g", final_rounds, c.final_compressor.c_str(),
                  c.final_eta);
      // a value encoding below the model's precision rounds what the exact count mixes
      const auto values = whole_model_values(c.final_compressor).value_or(sp::value_encoding::native);
      const char* rounding = values == sp::value_encoding::native || values == sp::value_encoding::f32 ||
                                     values == sp::value_encoding::f64
                                 ? ""
                                 : ", before the values' rounding";
      if (c.final_rounds != "auto") std::printf("\n");
      else if (final_plan.exact)
        std::printf(" (auto: the schedule averages exactly after %u rounds%s)\n", final_rounds, rounding);
      else
        std::printf(" (auto: every model ends within %.3g of its distance to the average%s)\n", final_plan.bound,
                    rounding);
    }

    json summary;
    double first_loss = -1;
    double train_seconds = 0;  // time inside rounds only (no loading, no evaluation)
    double eval_seconds = 0;   // time inside evaluations (every node's model and the averaged one)
    // Checkpoint after round `next - 1`: this rank's nodes (the algorithm's state and ledger), their
    // data positions, momentum and last losses, then (all ranks written) rank 0's manifest; each
    // rank keeps its previous file until the next checkpoint is complete.
    const std::uint32_t ckpt_every = c.checkpoint_every ? c.checkpoint_every : eval_every;
    std::uint32_t ckpt_prev = resume_round;
    auto save_checkpoint = [&](const auto& alg, std::uint32_t next) {
      sp::checkpoint_writer w;
      w.section("TRNR");
      w.str(settings);
      w.u32(next);
      w.u32(static_cast<std::uint32_t>(cl.rank));
      w.u32(static_cast<std::uint32_t>(cl.ranks));
      w.u64(cl.first);
      w.u64(cl.local);
      w.f64(first_loss);
      w.f64(train_seconds);
      w.values(std::span<const double>(last_loss.data() + cl.first, cl.local));
      for (std::size_t i = cl.first; i < cl.first + cl.local; ++i) {
        shards[i].save(w);
        w.values(velocity[i - cl.first]);
      }
      alg.save(w);
      sp::write_file_atomic(rank_file(c.checkpoint, next, cl.rank), w.finish());
#ifdef SPARSEPUSH_HAS_MPI
      if (mpi_net) mpi_net->agree("checkpoint round " + std::to_string(next));  // every rank's file is written
#endif
      if (cl.root()) write_manifest(c.checkpoint, {next, static_cast<std::uint32_t>(cl.ranks), settings});
      std::error_code ec;
      for (const auto& f : std::filesystem::directory_iterator(c.checkpoint, ec)) {
        const std::string name = f.path().filename().string();
        unsigned long r = 0;
        int k = -1;
        if (std::sscanf(name.c_str(), "round-%lu.rank-%d.ckpt", &r, &k) == 2 && k == cl.rank && r < ckpt_prev)
          std::filesystem::remove(f.path(), ec);
      }
      ckpt_prev = next;
    };
    // Restore this rank's file of round `resume_round`: all of it, or an error naming what is wrong.
    auto load_checkpoint = [&](auto& alg) {
      const std::string path = rank_file(c.resume, resume_round, cl.rank);
      const auto bytes = sp::read_file_bytes(path);
      sp::checkpoint_reader r(bytes, path);
      r.section("TRNR");
      const std::string was = r.str("settings", 1 << 16);
      if (was != settings) r.fail("was written with other settings: " + settings_diff(was, settings));
      if (r.u32("round") != resume_round) r.fail("holds another round than its manifest");
      if (r.u32("rank") != static_cast<std::uint32_t>(cl.rank) || r.u32("ranks") != static_cast<std::uint32_t>(cl.ranks) ||
          r.u64("first node") != cl.first || r.u64("local nodes") != cl.local)
        r.fail("was written by another rank layout");
      const double fl = r.f64("first loss");
      const double ts = r.f64("train seconds");
      std::vector<double> ll(cl.local);
      r.values(std::span<double>(ll), "last losses");
      std::vector<shard> sh;
      std::vector<std::vector<float>> vel(cl.local);
      for (std::size_t i = 0; i < cl.local; ++i) {
        sh.push_back(shards[cl.first + i].read(r));
        vel[i] = r.values<float>("momentum", d);  // empty once training has ended
        if (vel[i].size() != d && !(vel[i].empty() && resume_round >= train_rounds))
          r.fail("holds a momentum of " + std::to_string(vel[i].size()) + " elements for a model of " + std::to_string(d));
      }
      alg.restore(r);  // checks everything before it changes anything
      r.done();
      first_loss = fl;
      train_seconds = ts;
      for (std::size_t i = 0; i < cl.local; ++i) {
        last_loss[cl.first + i] = ll[i];
        shards[cl.first + i] = std::move(sh[i]);
        velocity[i] = std::move(vel[i]);
      }
    };

    auto run = [&](auto& alg) -> int {
      sp::round_report rep;
      evaluation ev;
      std::size_t bytes_now = 0;
      std::optional<std::size_t> bytes_at_final;  // bytes sent before SCSP's final rounds (all ranks)
      if (resume_round > 0) {
        load_checkpoint(alg);
        if (cl.root()) std::printf("resumed from %s at round %u\n", c.resume.c_str(), resume_round);
      }
      for (std::uint32_t t = resume_round; t < rounds; ++t) {
        if (t == train_rounds) {  // SCSP's final rounds take no local step: free the momentum
          for (auto* bufs : {&velocity, &nesterov_dirs})
            for (auto& v : *bufs) std::vector<float>().swap(v);
          bytes_at_final = cl.sum(alg.bytes_sent());  // a collective: every rank reaches it
        }
        const auto r0 = std::chrono::steady_clock::now();
        step(alg, t, lr(t));
        train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - r0).count();
        const std::vector<double> losses =
            cl.allgather(std::vector<double>(last_loss.begin() + cl.first, last_loss.begin() + cl.first + cl.local));
        double loss = 0;
        for (double l : losses) loss += l / static_cast<double>(n);
        if (first_loss < 0) first_loss = loss;
        const bool last = t + 1 == rounds;
        if (!std::isfinite(loss) || loss > 10 * first_loss + 10) {
          if (cl.root())
            std::fprintf(stderr, "\nsparsepush-train: training diverged at round %u (mean loss %g, started at %g): "
                       "lower --eta (now %g) or --lr (now %g)\n", t, loss, first_loss, c.eta, c.lr);
          return 3;
        }
        const bool eval_now = (t + 1) % eval_every == 0 || last;
        if (eval_now) {
          double divergence = 0.0;
          const auto e0 = std::chrono::steady_clock::now();
          ev = evaluate(alg,
                        last ? (c.final_eval_samples ? std::min<std::size_t>(c.final_eval_samples, fm.test.count) : fm.test.count)
                             : std::min<std::size_t>(c.eval_samples, fm.test.count),
                        divergence);
          eval_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - e0).count();
          rep = report(alg, t, divergence);
          bytes_now = rep.bytes_sent;
          const bool drifted = !std::isfinite(rep.parameter_divergence) || rep.parameter_divergence > 1e6;
          if (cl.broadcast(drifted ? 1 : 0)) {
            if (cl.root())
              std::fprintf(stderr, "\nsparsepush-train: node models drifted apart at round %u (divergence %g): "
                           "lower --eta (now %g) or --lr (now %g)\n", t, rep.parameter_divergence, c.eta, c.lr);
            return 3;
          }
        } else if (!cl.mpi_run) {
          bytes_now = alg.bytes_sent();
        }
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
        const double epoch = static_cast<double>(std::min(t + 1, train_rounds)) * c.batch / per_node;
        if (eval_now && log.is_open()) {
          const char* ph = scsp && t >= train_rounds ? "final-gossip" : "train";
          log << t + 1 << ',' << epoch << ',' << ph << ',' << loss << ',' << ev.avg_node_accuracy << ','
              << ev.averaged_model_accuracy << ',' << rep.parameter_divergence << ',' << rep.bytes_sent << ','
              << static_cast<double>(rep.bytes_sent) / 1e6 << ',' << rep.comm_ratio << ',' << wall << '\n';
        }
        // A terminal gets one live line, redrawn every round (accuracy from the last evaluation);
        // a pipe or file gets a plain line per evaluation.
        if (cl.root() && (tty || eval_now)) {
          const double eta_s = wall / (t + 1) * (rounds - t - 1);
          std::printf("%sround %u/%u  epoch %.2f  loss %.4f  acc %.2f%% (avg model %.2f%%)  div %.3g  %.1f MB  ETA %.0fs%s",
                      tty ? "\r" : "", t + 1, rounds, epoch, loss, 100 * ev.avg_node_accuracy,
                      100 * ev.averaged_model_accuracy, rep.parameter_divergence,
                      static_cast<double>(bytes_now) / 1e6, eta_s, tty ? "   " : "\n");
          std::fflush(stdout);
        }
        if (!c.checkpoint.empty() && (t + 1) % ckpt_every == 0 && t + 1 < rounds) {
          if (log.is_open()) log.flush();
          save_checkpoint(alg, t + 1);
        }
      }
      if (tty) std::printf("\n");
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
      const auto one = net.profile(c.batch * n, c.bits ? c.bits : 32), per = net.profile(c.batch, c.bits ? c.bits : 32);
      // sum_i u_i over every node, in node order (the same bits in one process and under MPI);
      // null for algorithms without push-sum weights
      json weight_mass = nullptr;
      if constexpr (requires { alg.group().u(std::size_t{0}); }) {
        std::vector<double> us(alg.num_nodes());
        for (std::size_t i = 0; i < us.size(); ++i) us[i] = alg.group().u(i);
        double mass = 0;
        for (const double u : cl.allgather(us)) mass += u;
        weight_mass = mass;
      }
      std::size_t dropped = 0;
      if constexpr (requires { alg.messages_dropped(); }) dropped = alg.messages_dropped();
      dropped = cl.sum(dropped);
      const json final_bytes = bytes_at_final ? json(rep.bytes_sent - *bytes_at_final) : json(nullptr);
      std::size_t sent = 0;
      if constexpr (requires { alg.messages_sent(); }) sent = alg.messages_sent();
      sent = cl.sum(sent);
      summary = {{"algorithm", c.algorithm},
                 {"nodes", n},
                 {"schedule", c.schedule},
                 {"compressor", c.compressor},
                 {"eta", c.eta},
                 {"final_rounds", final_rounds},
                 {"final_rounds_setting", scsp ? json(c.final_rounds) : json(nullptr)},
                 {"final_compressor", scsp ? json(c.final_compressor) : json(nullptr)},
                 {"final_eta", scsp ? json(c.final_eta) : json(nullptr)},
                 {"final_rounds_bound", scsp && c.final_rounds == "auto" ? json(final_plan.bound) : json(nullptr)},
                 {"bytes_final_phase", scsp ? json(final_bytes) : json(nullptr)},
                 {"skew", c.dirichlet > 0 ? json(nullptr) : json(c.skew)},
                 {"dirichlet_alpha", c.dirichlet > 0 ? json(c.dirichlet) : json(nullptr)},
                 {"model", c.model},
                 {"precision", c.bits == 0 ? std::string("fp32") : c.bits == 8 ? std::string("int8") : std::to_string(c.bits) + "-bit"},
                 {"bits", c.bits ? c.bits : 32u},
                 {"parameters", d},
                 {"rounds", rounds},
                 {"epochs", static_cast<double>(train_rounds) * c.batch / per_node},
                 {"avg_test_accuracy", ev.avg_node_accuracy},
                 {"averaged_model_test_accuracy", ev.averaged_model_accuracy},
                 {"param_divergence", rep.parameter_divergence},
                 {"bytes_sent_total", rep.bytes_sent},
                 {"bytes_per_node", rep.bytes_sent / n},
                 {"bytes_full_precision_equivalent", rep.full_precision_bytes},
                 {"comm_ratio", rep.comm_ratio},
                 {"state_bytes_per_node", alg.state_bytes(0)},
                 {"drop_probability", c.drop_probability},
                 {"loss_recovery", c.loss_recovery},
                 {"messages_sent", sent},
                 {"messages_dropped", dropped},
                 {"weight_mass", weight_mass},
                 {"transport", c.transport},
                 {"ranks", cl.ranks},
                 {"wall_seconds", wall},
                 {"train_seconds", train_seconds},
                 {"eval_seconds", eval_seconds},
                 {"train_images_per_second", static_cast<double>(train_rounds) * c.batch * n / train_seconds},
                 {"device_profile",
                  {{"one_device", {{"batch", c.batch * n}, {"parameters", one.parameters}, {"activation_bytes", one.activation_bytes}, {"flops_per_step", one.flops}}},
                   {"per_device", {{"batch", c.batch}, {"parameters", per.parameters}, {"activation_bytes", per.activation_bytes}, {"flops_per_step", per.flops}}},
                   {"bits", per.bits},
                   {"memory_reduction", per.memory_reduction},
                   {"compute_reduction", per.compute_reduction},
                   {"communication_reduction", per.communication_reduction},
                   {"compute_energy_reduction", per.compute_energy_reduction},
                   {"compute_energy_joules_per_step", per.compute_energy_joules},
                   {"compute_energy_joules_total", per.compute_energy_joules * static_cast<double>(train_rounds) * static_cast<double>(n)},
                   {"communication_energy_joules", sp::nn::communication_energy_joules(static_cast<double>(rep.bytes_sent))}}}};
      return 0;
    };

    int rc = 0;
    const auto sched = sp::parse_schedule(c.schedule, n, c.seed);
    // Run `alg` built over this process's network: its own loopback, or the MPI network.
    auto run_choco = [&](auto&... net) {
      using net_t = std::conditional_t<sizeof...(net) == 0, sp::loopback_network, std::remove_reference_t<decltype((net, ...))>>;
      sp::choco<float, sp::any_compressor, sp::any_schedule, net_t> alg(
          std::move(x0), sched, net...,
          {.consensus_step = c.consensus_step, .compressor = sp::parse_compressor(c.compressor), .threads = c.threads,
           .seed = c.seed});
      return run(alg);
    };
    auto run_sparse_push = [&](const sp::phase_schedule& phases, auto&... net) {
      using net_t = std::conditional_t<sizeof...(net) == 0, sp::loopback_network, std::remove_reference_t<decltype((net, ...))>>;
      const sp::sparse_push_options so{
          .threads = c.threads,
          .seed = c.seed,
          .network = {.drop_probability = c.drop_probability, .seed = c.seed},
          .recovery = c.loss_recovery == "ack" ? sp::loss_recovery::acknowledged : sp::loss_recovery::none};
      sp::sparse_push<float, sp::any_compressor, sp::any_schedule, net_t> alg(std::move(x0), sched, phases, net..., so);
      return run(alg);
    };
    if (c.algorithm == "centralized") {
      sp::centralized<float> alg(init, n, c.threads);
      rc = run(alg);
    } else if (c.algorithm == "choco") {
#ifdef SPARSEPUSH_HAS_MPI
      if (mpi_net) rc = run_choco(*mpi_net);
      else
#endif
        rc = run_choco();
    } else {
      auto comp = sp::parse_compressor(c.compressor);
      if (c.per_layer) {
        const auto* tk = std::get_if<sp::top_k>(&comp.get());
        if (!tk) throw sp::config_error("--per-layer needs a top-k compressor, got " + c.compressor);
        sp::top_k per = *tk;
        for (std::size_t l = 0; l < net.layers().size(); ++l) {
          const std::size_t off = net.param_offset(l);
          if (off < d && (per.segments.empty() || off > per.segments.back())) per.segments.push_back(off);
        }
        if (per.segments.empty() || per.segments.front() != 0) per.segments.insert(per.segments.begin(), 0);
        comp = per;
      }
      const sp::phase_schedule phases =
          scsp ? sp::scsp_phases(comp, c.eta, train_rounds, sp::parse_compressor(c.final_compressor), c.final_eta,
                                 final_rounds)
               : sp::sparse_push_phases(comp, c.eta);
#ifdef SPARSEPUSH_HAS_MPI
      if (mpi_net) rc = run_sparse_push(phases, *mpi_net);
      else
#endif
        rc = run_sparse_push(phases);
    }
#ifdef SPARSEPUSH_HAS_MPI
    if (mpi_net) mpi_net->finish();
#endif
    if (rc != 0) return rc;
    if (!cl.root()) return 0;
    std::printf("%s\n", summary.dump(2).c_str());
    if (!c.summary.empty()) {
      std::ofstream out(c.summary);
      if (!out) throw sp::data_error("cannot write the summary file " + c.summary);
      out << summary.dump(2) << '\n';
    }
    if (!c.plot.empty()) {
      log.close();
      // The paths and the title reach gnuplot as data (ARG1..ARG3 of `gnuplot -c`), never as
      // gnuplot code, and gnuplot is started without a shell: no path can run a command.
      const std::string script = c.plot + ".gp";
      std::ofstream gp(script);
      if (!gp) throw sp::data_error("cannot write the plot script " + script);
      gp << "# sparsepush-train plot: gnuplot -c THIS_FILE LOG.csv PLOT.png TITLE\n"
         << "set terminal pngcairo size 1200,800\nset output ARG2\nset datafile separator ','\n"
         << "set multiplot layout 2,2 title ARG3\n"
         << "set key bottom right\nset xlabel 'round'\nset ylabel 'test accuracy'\n"
         << "plot ARG1 using 1:5 skip 1 with lines title 'node average', '' using 1:6 skip 1 with lines title 'averaged model'\n"
         << "set xlabel 'MB sent'\nplot ARG1 using 9:5 skip 1 with lines title 'node average', '' using 9:6 skip 1 with lines title 'averaged model'\n"
         << "set logscale y\nset xlabel 'round'\nset ylabel 'parameter divergence'\nplot ARG1 using 1:7 skip 1 with lines title 'divergence'\n"
         << "set xlabel 'MB sent'\nplot ARG1 using 9:7 skip 1 with lines title 'divergence'\nunset multiplot\n";
      gp.close();
      const std::string title = c.algorithm + " " + c.compressor + ", " + std::to_string(n) + " nodes, " + c.schedule;
      if (run_program({"gnuplot", "-c", script, c.log, c.plot, title}) != 0)
        std::fprintf(stderr, "sparsepush-train: gnuplot failed; the plot script is %s (gnuplot -c it with the log, "
                     "the plot and a title)\n", script.c_str());
      else
        std::printf("plot written to %s\n", c.plot.c_str());
    }
  } catch (const sp::error& e) {
    if (cl.mpi_run) std::fprintf(stderr, "sparsepush-train: rank %d: %s\n", cl.rank, e.what());
    else std::fprintf(stderr, "sparsepush-train: %s\n", e.what());
    return fail(2);
  } catch (const std::bad_alloc&) {  // a message and exit code 2, never an abort
    std::fprintf(stderr, "sparsepush-train: rank %d: out of memory (fewer --nodes, a smaller --model or --batch)\n",
                 cl.rank);
    return fail(2);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsepush-train: rank %d: %s\n", cl.rank, e.what());
    return fail(2);
  }
  return 0;
}
