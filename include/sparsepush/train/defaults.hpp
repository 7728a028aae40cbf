// sparsepush/train/defaults.hpp: the consensus step each compressor trains with by default. With
// the model itself compressed (a delta-sigma loop, docs/design/algorithms.md) eta must shrink with the share
// of values sent: 1 for identity, 0.2 for QSGD, 0.05 for scaled sign, and for a sparsifier
// keeping a fraction f: 0.1 at f >= 10%, 0.02 at f >= 1%, 0.01 below; a count k (top-k:1000) is
// taken as f = 1%, so 0.02.
#pragma once

#include <optional>
#include <variant>

#include "../compress/compose.hpp"

namespace sparsepush {
inline namespace v0 {

/// The default eta of a compressor.
inline double default_eta(const any_compressor& c) {
  if (std::holds_alternative<identity>(c.get())) return 1.0;
  if (std::holds_alternative<qsgd>(c.get())) return 0.2;
  if (std::holds_alternative<scaled_sign>(c.get())) return 0.05;
  double f = 0.01;
  std::visit(
      [&](const auto& x) {
        if constexpr (requires { x.k; }) f = x.k.is_fraction() ? x.k.fraction_value() : 0.01;
      },
      c.get());
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

}  // namespace v0
}  // namespace sparsepush
