// Fuzz target: the IDX reader (plain or gzip) through files, as users call it: the input is
// written to a temporary file (one per process) and read as images and as labels, or split into
// an image file and a label file for load_labelled. A file is refused with a data_error (never
// bad_alloc: the reader caps what a header may announce and grows only as bytes arrive), or it
// yields exactly the announced sizes, which for a plain file account for every byte of it; and
// load_labelled succeeds exactly when both files read, their counts agree and every label is
// below 10, with pixels scaled into [0, 1].
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>

#include <sparsepush/data/idx.hpp>

#include "fuzz_common.hpp"
#include "fuzz_inputs.hpp"

namespace {

using namespace sparsepush;

/// A file in the temporary directory, named after the process, removed at exit.
class scratch_file {
 public:
  explicit scratch_file(const char* tag)
      : path_((std::filesystem::temp_directory_path() /
               ("sparsepush-fuzz-idx-" + std::to_string(::getpid()) + "-" + tag))
                  .string()) {}
  ~scratch_file() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  const std::string& write(std::span<const std::uint8_t> bytes) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    SPARSEPUSH_FUZZ_CHECK(f != nullptr);
    SPARSEPUSH_FUZZ_CHECK(bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
    SPARSEPUSH_FUZZ_CHECK(std::fclose(f) == 0);
    return path_;
  }

 private:
  std::string path_;
};

bool gzip_magic(std::span<const std::uint8_t> file) {
  return file.size() >= 2 && file[0] == 0x1f && file[1] == 0x8b;
}

std::optional<idx_images> images(const std::string& path, std::span<const std::uint8_t> file) {
  idx_images im;
  try {
    im = read_idx_images(path);
  } catch (const data_error&) {
    return std::nullopt;
  }
  SPARSEPUSH_FUZZ_CHECK(im.rows >= 1 && im.rows <= 4096 && im.cols >= 1 && im.cols <= 4096);
  const std::uint64_t pixels = std::uint64_t{im.count} * im.rows * im.cols;
  SPARSEPUSH_FUZZ_CHECK(im.pixels.size() == pixels);
  if (!gzip_magic(file)) SPARSEPUSH_FUZZ_CHECK(file.size() == 16 + pixels);
  return im;
}

std::optional<idx_labels> labels(const std::string& path, std::span<const std::uint8_t> file) {
  idx_labels lb;
  try {
    lb = read_idx_labels(path);
  } catch (const data_error&) {
    return std::nullopt;
  }
  if (!gzip_magic(file)) SPARSEPUSH_FUZZ_CHECK(file.size() == 8 + lb.labels.size());
  return lb;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const scratch_file first_file("a"), second_file("b");
  const auto in = sparsepush_fuzz::idx_input::read({data, size});
  const std::string& first = first_file.write(in.first);
  if (!in.pair) {
    const auto im = images(first, in.first);
    const auto lb = labels(first, in.first);
    SPARSEPUSH_FUZZ_CHECK(!(im && lb));  // the magic numbers differ
    return 0;
  }
  const std::string& second = second_file.write(in.second);
  const auto im = images(first, in.first);
  const auto lb = labels(second, in.second);
  bool expect = im && lb && lb->labels.size() == im->count;
  if (expect)
    for (const auto l : lb->labels) expect &= l < 10;
  labelled_images set;
  try {
    set = load_labelled(first, second);
  } catch (const data_error&) {
    SPARSEPUSH_FUZZ_CHECK(!expect);
    return 0;
  }
  SPARSEPUSH_FUZZ_CHECK(expect);
  SPARSEPUSH_FUZZ_CHECK(set.count == im->count && set.rows == im->rows && set.cols == im->cols);
  SPARSEPUSH_FUZZ_CHECK(set.labels == lb->labels && set.pixels.size() == im->pixels.size());
  for (std::size_t p = 0; p < set.pixels.size(); ++p) {
    SPARSEPUSH_FUZZ_CHECK(set.pixels[p] >= 0.0f && set.pixels[p] <= 1.0f);
    SPARSEPUSH_FUZZ_CHECK((set.pixels[p] == 0.0f) == (im->pixels[p] == 0));
  }
  return 0;
}
