// sparsepush/gossip/detail/node_checkpoint.hpp: push_sum_node's checkpoint section "NODE"
// (id, dim, u_i, whether e_i is kept, x_i, e_i), written by save() and read and checked by
// read_state(), defined out of the class (gossip/node.hpp includes it).
#pragma once

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "../../checkpoint.hpp"
#include "../push_sum_node.hpp"

namespace sparsepush {
inline namespace v0 {

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_node<Tensor>::save(checkpoint_writer& w) const {
  w.section("NODE");
  w.u32(opt_.id);
  w.u64(d_);
  w.f64(u_);
  w.u32(residual_.empty() ? 0 : 1);
  w.values(x());
  if (!residual_.empty()) w.values(std::span<const T>(residual_));
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline auto push_sum_node<Tensor>::read_state(checkpoint_reader& r) const -> saved_state {
  r.section("NODE");
  const auto id = r.u32("node id");
  if (id != opt_.id) r.fail("holds node " + std::to_string(id) + " where node " + std::to_string(opt_.id) + " was expected");
  const auto d = r.u64("node dim");
  if (d != d_)
    r.fail("holds node " + std::to_string(id) + " with " + std::to_string(d) + " parameters, the model has " +
           std::to_string(d_));
  saved_state s;
  s.u = r.f64("push-sum weight u");
  if (!(std::isfinite(s.u) && s.u > 0.0)) r.fail("holds node " + std::to_string(id) + " with a weight u that is not finite and positive");
  const bool has_e = r.u32("residual flag") != 0;
  if (has_e != !residual_.empty())
    r.fail(std::string("holds node ") + std::to_string(id) + (has_e ? " with" : " without") +
           " an error-feedback residual, this run keeps " + (residual_.empty() ? "none" : "one"));
  s.x.resize(d_);
  r.values(std::span<T>(s.x), "x");
  if (has_e) {
    s.e.resize(d_);
    r.values(std::span<T>(s.e), "residual e");
  }
  for (const auto* v : {&s.x, &s.e})
    for (const T a : *v)
      if (!std::isfinite(a)) r.fail("holds node " + std::to_string(id) + " with a NaN or Inf in x or e (corrupted)");
  // the round's own checks: u not below min_weight(), and a de-biased model x / u that is finite
  if (!(s.u >= min_weight())) r.fail("holds node " + std::to_string(id) + " with a weight u below min_weight()");
  for (const T a : s.x)
    if (!std::isfinite(static_cast<T>(static_cast<double>(a) / s.u)))
      r.fail("holds node " + std::to_string(id) + " whose de-biased model x / u is not finite (corrupted)");
  return s;
}

}  // namespace v0
}  // namespace sparsepush
