// sparsepush/train/defaults.hpp: the consensus step each compressor trains with by default. With
// the model itself compressed (a delta-sigma loop, docs/design/algorithms.md) eta must shrink with the share
// of values sent: 1 for identity, 0.2 for QSGD, 0.05 for scaled sign, and for a sparsifier
// keeping a fraction f: 0.1 at f >= 10%, 0.02 at f >= 1%, 0.01 below; a count k (top-k:1000) is
// taken as f = 1%, so 0.02.
#pragma once

#include <optional>
#include <variant>

#include "../compress/compose.hpp"
#include "../transport/wait_policy.hpp"

namespace sparsepush {
inline namespace v0 {

namespace detail {
/// The fraction of values a sparsifier keeps, as the defaults read it: its fraction, or 1% for a
/// count k (the model's size is not known where the defaults are read).
inline double kept_fraction(const any_compressor& c) {
  double f = 0.01;
  std::visit(
      [&](const auto& x) {
        if constexpr (requires { x.k; }) f = x.k.is_fraction() ? x.k.fraction_value() : 0.01;
      },
      c.get());
  return f;
}
}  // namespace detail

/// The default eta of a compressor.
inline double default_eta(const any_compressor& c) {
  if (std::holds_alternative<identity>(c.get())) return 1.0;
  if (std::holds_alternative<qsgd>(c.get())) return 0.2;
  if (std::holds_alternative<scaled_sign>(c.get())) return 0.05;
  const double f = detail::kept_fraction(c);
  return f >= 0.1 ? 0.1 : f >= 0.01 ? 0.02 : 0.01;
}

/// The value encoding of a compressor that sends whole models (identity, whose values may be
/// rounded: +fp16, +bf16, +int8), or nothing for a sparsifier, sign or QSGD, which mix more slowly
/// than the schedule's matrices show (SCSP's automatic final-round count needs the former).
inline std::optional<value_encoding> whole_model_values(const any_compressor& c) {
  const auto* whole = std::get_if<identity>(&c.get());
  if (!whole || whole->values.encoding == value_encoding::sign || whole->values.encoding == value_encoding::qsgd)
    return std::nullopt;
  return whole->values.encoding;
}

/// The default consensus step gamma_c of CHOCO-Push with compressor c. What a message leaves out
/// of x_i' - h comes back multiplied by gamma_c in later rounds, so gamma_c must shrink with the
/// share of values sent (CHOCO's theory): 1 for whole models (identity, also rounded to fp16, bf16
/// or int8), 0.2 for scaled sign, and for a sparsifier keeping a fraction f: 1 at f >= 10%, 0.5 at
/// f >= 4%, 0.3 at f >= 1%, 0.1 below (a count k is taken as f = 1%, so 0.3). QSGD is refused
/// (not_contracting). Measured (docs/results/consensus.md): top-1% trains best at 0.3-0.5 and
/// top-10% at 1; on tests/test_choco_push.cpp's least-squares problem f = 4% diverges at 0.8.
/// Under a policy whose delays are random (bounded staleness, asynchronous) the weights u_i move
/// from round to round and the references follow numerators that move with them: half the step
/// trains better there (top-10%+int8 under staleness 2: 1.38 times SGP's samples at 0.5 against
/// 3.25 at 1), so the default is halved. Overlap, one round late exactly, keeps the lockstep one.
inline double default_consensus_step(const any_compressor& c, const wait_policy& policy = {}) {
  const double halve = policy.kind == wait_kind::bounded || policy.kind == wait_kind::asynchronous ? 0.5 : 1.0;
  if (whole_model_values(c)) return halve;
  if (std::holds_alternative<scaled_sign>(c.get())) return 0.2 * halve;
  const double f = detail::kept_fraction(c);
  return (f >= 0.1 ? 1.0 : f >= 0.04 ? 0.5 : f >= 0.01 ? 0.3 : 0.1) * halve;
}

}  // namespace v0
}  // namespace sparsepush
