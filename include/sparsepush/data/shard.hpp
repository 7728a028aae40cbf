// sparsepush/data/shard.hpp: one node's shard of a partition (partition.hpp) and its own seeded
// minibatch order: the shard is reshuffled (std::mt19937_64) at the start of every epoch, and its
// position (order, cursor, epoch, generator) is checkpointed so that a resumed run draws the same
// minibatches as an uninterrupted one.
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../checkpoint.hpp"

namespace sparsepush {
inline namespace v0 {

/// A node's samples and where its minibatches stand.
struct shard_sampler {
  ///@{
  /// The node's sample indices, and this epoch's shuffled order of them.
  std::vector<std::uint32_t> samples, order;
  ///@}
  std::size_t cursor = 0;  ///< the next position in order
  std::uint32_t epoch = 0;  ///< the epochs started (each reshuffles order)
  std::mt19937_64 gen;  ///< the shuffling generator, seeded per node

  shard_sampler() = default;
  /// The samples of one node, shuffled with `seed` before the first batch.
  shard_sampler(std::vector<std::uint32_t> s, std::uint64_t seed)
      : samples(std::move(s)), order(samples), cursor(samples.size()), gen(seed) {}

  /// The next `batch` sample indices into out (crossing into the next epoch as needed).
  void next_batch(std::size_t batch, std::vector<std::uint32_t>& out) {
    if (samples.empty()) throw config_error("shard_sampler: a node has no samples to draw a batch from");
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
  /// Checkpoint section "SHRD": order, cursor, epoch and the generator's state.
  void save(checkpoint_writer& w) const {
    w.section("SHRD");
    w.values(order);
    w.u64(cursor);
    w.u32(epoch);
    std::ostringstream g;
    g << gen;
    w.str(g.str());
  }
  /// The saved position, checked (the same samples, a cursor inside them), as a new sampler;
  /// this one is not changed.
  shard_sampler read(checkpoint_reader& r) const {
    r.section("SHRD");
    shard_sampler s;
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

}  // namespace v0
}  // namespace sparsepush
