// sparsepush/data/files.hpp: where Debian's dataset-fashion-mnist package puts Fashion-MNIST, and
// the names of its four files, written once for the reader (idx.hpp), the run description's
// default --data and the checks of the files a run touches. No dependency.
#pragma once

#include <array>
#include <string_view>

namespace sparsepush {
inline namespace v0 {

/// The directory of Debian's dataset-fashion-mnist package: the default --data.
inline constexpr std::string_view fashion_mnist_default_dir = "/usr/share/datasets/fashion-mnist";

/// The four files of a Fashion-MNIST directory, in this order: training images and labels, test
/// images and labels.
inline constexpr std::array<std::string_view, 4> fashion_mnist_file_names = {
    "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
    "t10k-labels-idx1-ubyte.gz"};

}  // namespace v0
}  // namespace sparsepush
