// Fuzz target: the checkpoint loader. The first byte picks how the rest is used: 0, as a whole
// checkpoint file (so mutations meet the frame checks: magic, version, length, CRC); otherwise,
// as a payload that is framed with a correct CRC (so mutations reach the field checks). The file
// is then restored into a Sparse-Push run (SCSP phases, error feedback) and into a CHOCO run of a
// fixed small shape. A restore either throws checkpoint_error and leaves the run exactly as it
// was, or succeeds with every model finite and every push-sum weight finite and positive (bytes
// after the algorithm's sections are for the caller's done() to refuse).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include <sparsepush/sparsepush.hpp>

#include "fuzz_checkpoint_setup.hpp"
#include "fuzz_common.hpp"

namespace {
using namespace sparsepush;
using namespace sparsepush_fuzz::checkpoint_setup;

template <class A>
std::vector<double> snapshot(const A& a) {
  std::vector<double> s;
  for (std::size_t i = 0; i < a.num_nodes(); ++i) {
    const auto m = a.model(i);
    s.insert(s.end(), m.begin(), m.end());
  }
  s.push_back(static_cast<double>(a.bytes_sent()));
  return s;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

template <class A>
void restore_into(A& alg, std::span<const std::byte> file) {
  const auto before = snapshot(alg);
  std::optional<checkpoint_reader> r;
  try {
    r.emplace(file, "fuzz");
    alg.restore(*r);
  } catch (const checkpoint_error&) {
    SPARSEPUSH_FUZZ_CHECK(same_bits(before, snapshot(alg)));  // nothing half restored
    return;
  }
  for (std::size_t i = 0; i < alg.num_nodes(); ++i)
    for (const double v : alg.model(i)) SPARSEPUSH_FUZZ_CHECK(std::isfinite(v));
  // bytes after the algorithm's sections are the caller's to refuse (done()); restore has
  // already taken what it read, which was valid
  try {
    r->done();
  } catch (const checkpoint_error&) {
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto* body = reinterpret_cast<const std::byte*>(data + 1);
  std::vector<std::byte> file(body, body + size - 1);
  if (data[0] != 0) file = frame(file);
  static auto sp_run = make_sparse_push();
  static auto choco_run = make_choco();
  restore_into(*sp_run, file);
  for (std::size_t i = 0; i < sp_run->num_nodes(); ++i) {
    const double u = sp_run->group().u(i);
    SPARSEPUSH_FUZZ_CHECK(std::isfinite(u) && u > 0.0);
  }
  restore_into(*choco_run, file);
  return 0;
}
