// sparsepush/nn/architectures.hpp: the models the reference backend builds by name (nn::model::make):
//   "mlp"               dense 256, ReLU, dense 128, ReLU, dense classes;
//   "cnn"               2 x [conv3x3 (pad 1) 16 or 32 -> GroupNorm(4) -> ReLU -> maxpool2], flatten,
//                       dense classes (20,586 parameters on 1x28x28, 10 classes);
//   "cnn_evonorm"       as cnn with EvoNorm-S0 (4 groups) in place of GroupNorm + ReLU;
//   "cnn_range_evonorm" as cnn with Range-EvoNorm (4 groups, arXiv 2111.09389) in their place.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "../config.hpp"
#include "workspace.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

namespace detail {

/// The names named_layers() (and so nn::model::make) knows.
inline const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names{"mlp", "cnn", "cnn_evonorm", "cnn_range_evonorm"};
  return names;
}

/// The layers of model `name` (see the header comment) on images of channels x rows x cols and
/// `classes` outputs; config_error for an unknown name, an empty input, classes outside [2, 256]
/// or a cnn on images below 4x4.
inline std::vector<layer> named_layers(const std::string& name, std::size_t channels, std::size_t rows,
                                       std::size_t cols, std::size_t classes) {
  const shape3 in{channels, rows, cols};
  const std::string where = "nn::model::make(\"" + name + "\", " + in.str() + ", " + std::to_string(classes) +
                            " classes): ";
  if (in.size() == 0 || classes < 2 || classes > 256)
    throw config_error(where + "the input must be non-empty and classes in [2, 256] (labels are bytes)");
  std::vector<layer> ls;
  if (name == "mlp") {
    ls.emplace_back(dense(in, 256));
    ls.emplace_back(relu({256, 1, 1}));
    ls.emplace_back(dense({256, 1, 1}, 128));
    ls.emplace_back(relu({128, 1, 1}));
    ls.emplace_back(dense({128, 1, 1}, classes));
  } else if (name == "cnn" || name == "cnn_evonorm" || name == "cnn_range_evonorm") {
    if (rows < 4 || cols < 4) throw config_error(where + "the cnn needs at least 4x4 images (two 2x2 pools)");
    const bool evo = name == "cnn_evonorm", range_evo = name == "cnn_range_evonorm";
    shape3 s = in;
    for (std::size_t width : {std::size_t{16}, std::size_t{32}}) {
      const conv2d conv(s, width, 3, 1, 1);
      ls.emplace_back(conv);
      s = conv.out_shape();
      if (evo) {
        ls.emplace_back(evo_norm_s0(s, 4));
      } else if (range_evo) {
        ls.emplace_back(range_evo_norm(s, 4));
      } else {
        ls.emplace_back(group_norm(s, 4));
        ls.emplace_back(relu(s));
      }
      const max_pool2d pool(s, 2, 2);
      ls.emplace_back(pool);
      s = pool.out_shape();
    }
    ls.emplace_back(flatten(s));
    ls.emplace_back(dense({s.size(), 1, 1}, classes));
  } else {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    throw config_error("nn::model::make: unknown model \"" + name + "\" (known: " + known + ")");
  }
  return ls;
}

}  // namespace detail

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
