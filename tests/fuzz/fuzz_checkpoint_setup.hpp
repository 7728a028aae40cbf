// The shapes the checkpoint fuzz target restores into, shared with make_corpus.cpp, which writes
// real checkpoints of them (after a few rounds) as seeds.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include <sparsepush/sparsepush.hpp>

namespace sparsepush_fuzz::checkpoint_setup {

inline constexpr std::size_t nodes = 4, dim = 8;

inline std::vector<std::vector<double>> start() {
  std::vector<std::vector<double>> x(nodes, std::vector<double>(dim));
  for (std::size_t i = 0; i < nodes; ++i)
    for (std::size_t l = 0; l < dim; ++l) x[i][l] = std::sin(double(i * dim + l));
  return x;
}

inline const sparsepush::gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t,
                                                             std::span<const double> x, std::span<double> g) {
  for (std::size_t l = 0; l < x.size(); ++l) g[l] = x[l] - double(i);
};

inline std::unique_ptr<sparsepush::sparse_push<double>> make_sparse_push() {
  using namespace sparsepush;
  return std::make_unique<sparse_push<double>>(
      start(), parse_schedule("time-varying-ring", nodes), scsp_phases(parse_compressor("top-k:0.25"), 0.5, 6, 2),
      sparse_push_options{.network = {.drop_probability = 0.2, .seed = 1}, .recovery = loss_recovery::acknowledged});
}

inline std::unique_ptr<sparsepush::choco<double>> make_choco() {
  using namespace sparsepush;
  return std::make_unique<choco<double>>(start(), parse_schedule("undirected-ring", nodes),
                                         choco_options{.compressor = parse_compressor("top-k:0.25")});
}

/// A payload framed as a checkpoint file with a correct CRC.
inline std::vector<std::byte> frame(const std::vector<std::byte>& payload) {
  const std::size_t n = payload.size();
  std::vector<std::byte> f(sparsepush::checkpoint_overhead + n);
  std::memcpy(f.data(), sparsepush::checkpoint_magic, 8);
  auto put = [&](std::size_t at, std::uint64_t v, std::size_t bytes) {
    for (std::size_t i = 0; i < bytes; ++i) f[at + i] = static_cast<std::byte>((v >> (8 * i)) & 0xFF);
  };
  put(8, sparsepush::checkpoint_version, 4);
  put(12, n, 8);
  if (n) std::memcpy(f.data() + 20, payload.data(), n);
  put(20 + n, sparsepush::detail::crc32_update(0, std::span<const std::byte>(f.data(), 20 + n)), 4);
  return f;
}

/// Seeds: real checkpoints of both shapes after 3 rounds, as files (mode 0) and as payloads to
/// frame (mode 1).
inline std::vector<std::vector<std::uint8_t>> seeds() {
  using namespace sparsepush;
  std::vector<std::vector<std::uint8_t>> out;
  auto add = [&](const auto& alg) {
    checkpoint_writer w;
    alg.save(w);
    const auto file = w.finish();
    const auto& payload = w.payload();
    std::vector<std::uint8_t> a{0}, b{1};
    for (const auto x : file) a.push_back(std::to_integer<std::uint8_t>(x));
    for (const auto x : payload) b.push_back(std::to_integer<std::uint8_t>(x));
    out.push_back(a);
    out.push_back(b);
  };
  auto s = make_sparse_push();
  auto c = make_choco();
  for (std::uint32_t t = 0; t < 3; ++t) {
    s->round(t, oracle, 0.1);
    c->round(t, oracle, 0.1);
  }
  add(*s);
  add(*c);
  return out;
}

}  // namespace sparsepush_fuzz::checkpoint_setup
