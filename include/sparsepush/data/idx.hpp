// sparsepush/data/idx.hpp: the IDX format of (Fashion-)MNIST, plain or gzip-compressed (read
// through zlib, which handles both). Images: magic 0x00000803, count, rows, cols, then
// count*rows*cols bytes; labels: magic 0x00000801, count, then count bytes (big-endian header).
// load_fashion_mnist(dir) reads the four files of Debian's dataset-fashion-mnist package
// (/usr/share/datasets/fashion-mnist). Every failure is a data_error naming file and problem;
// only regular files are opened (a FIFO would block open() forever). Needs zlib: link
// sparsepush::data; the core never includes this header.
#pragma once

#include <zlib.h>

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "../checkpoint/file.hpp"  // detail::open_regular_file
#include "files.hpp"
#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {

/// A data file is missing, truncated or malformed, or two files disagree.
class data_error : public error {
 public:
  using error::error;
};

/// Images as bytes, row-major: pixels[(i * rows + r) * cols + c].
struct idx_images {
  ///@{
  /// The number of images and each one's rows and columns (28 x 28 for MNIST).
  std::uint32_t count = 0, rows = 0, cols = 0;
  ///@}
  std::vector<std::uint8_t> pixels;  ///< count rows cols grey levels, 0 .. 255
};

/// Labels, one byte each.
struct idx_labels {
  std::vector<std::uint8_t> labels;  ///< one class label a sample, in file order
};

/// Default location of Debian's dataset-fashion-mnist files.
inline const char* default_fashion_mnist_dir() noexcept { return fashion_mnist_default_dir.data(); }

namespace detail {
class gz_reader {
 public:
  explicit gz_reader(const std::string& path) : path_(path) {
    const opened_file file = open_regular_file(path);
    if (file.fd < 0 && file.error == ENOENT)
      throw data_error("data file " + path + " does not exist (install the Debian package "
                       "dataset-fashion-mnist or pass another directory)");
    if (file.fd < 0) throw data_error(file.why);  // "PATH is not a regular file (a FIFO)", "cannot open PATH: ..."
    f_ = gzdopen(file.fd, "rb");  // gzclose closes the descriptor
    if (!f_) {
      ::close(file.fd);
      throw data_error("cannot open data file " + path + " (zlib)");
    }
  }
  ~gz_reader() {
    if (f_) gzclose(f_);
  }
  gz_reader(const gz_reader&) = delete;
  gz_reader& operator=(const gz_reader&) = delete;

  /// Read up to n bytes (fewer only at the end of the file); a read error throws.
  std::size_t read_some(void* dst, std::size_t n, const char* what) {
    auto* p = static_cast<unsigned char*>(dst);
    std::size_t got = 0;
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
      const int r = gzread(f_, p + got, chunk);
      if (r < 0) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        throw data_error(path_ + ": read error in " + what + ": " + (msg ? msg : "unknown"));
      }
      if (r == 0) break;
      got += static_cast<std::size_t>(r);
    }
    return got;
  }
  /// Read exactly n bytes or throw naming what was being read.
  void read(void* dst, std::size_t n, const char* what) {
    const std::size_t got = read_some(dst, n, what);
    if (got < n)
      throw data_error(path_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes, file ends after " +
                       std::to_string(got));
  }
  /// Read exactly n bytes into out, growing it as the bytes arrive: a header that announces more
  /// than the file holds costs no more memory than the file (plus one 16 MiB step), then throws
  /// "truncated".
  template <class Byte>
  void read_into(std::vector<Byte>& out, std::uint64_t n, const char* what) {
    static_assert(sizeof(Byte) == 1);
    constexpr std::uint64_t step = std::uint64_t{1} << 24;
    out.clear();
    while (out.size() < n) {
      const std::size_t at = out.size();
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(step, n - at));
      out.resize(at + take);
      const std::size_t got = read_some(out.data() + at, take, what);
      if (got < take) {
        out.clear();
        out.shrink_to_fit();
        throw data_error(path_ + ": truncated: " + what + " needs " + std::to_string(n) + " bytes, file ends after " +
                         std::to_string(at + got));
      }
    }
  }
  std::uint32_t read_be32(const char* what) {
    unsigned char b[4];
    read(b, 4, what);
    return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) | b[3];
  }
  /// The bytes left after what was read (reading them all).
  std::uint64_t rest() {
    unsigned char buf[1 << 16];
    std::uint64_t n = 0;
    for (;;) {
      const std::size_t got = read_some(buf, sizeof buf, "the bytes after the data");
      n += got;
      if (got < sizeof buf) return n;
    }
  }
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};
}  // namespace detail

/// Reads an IDX image file (plain or gzip). Throws data_error naming the file and the problem (not
/// a regular file, a bad magic or header, fewer bytes than the header announces).
inline idx_images read_idx_images(const std::string& path) {
  detail::gz_reader in(path);
  const std::uint32_t magic = in.read_be32("the magic number");
  if (magic != 0x00000803u)
    throw data_error(path + ": bad magic number " + std::to_string(magic) + " (an IDX image file has 2051)");
  idx_images im;
  im.count = in.read_be32("the image count");
  im.rows = in.read_be32("the row count");
  im.cols = in.read_be32("the column count");
  if (im.rows == 0 || im.cols == 0 || im.rows > 4096 || im.cols > 4096)
    throw data_error(path + ": implausible image size " + std::to_string(im.rows) + "x" + std::to_string(im.cols));
  const std::uint64_t bytes = std::uint64_t{im.count} * im.rows * im.cols;
  if (bytes > (std::uint64_t{1} << 34))
    throw data_error(path + ": header announces " + std::to_string(bytes) +
                     " bytes of pixels, more than the 16 GiB (2^34 bytes) an image file may hold");
  in.read_into(im.pixels, bytes, "the pixels");
  if (const std::uint64_t extra = in.rest())
    throw data_error(path + ": " + std::to_string(extra) + " bytes after the " + std::to_string(im.count) + " images of " +
                     std::to_string(im.rows) + "x" + std::to_string(im.cols) +
                     " the header announces (is the header's image count or size wrong?)");
  return im;
}

/// Reads an IDX label file (plain or gzip). Throws data_error naming the file and the problem.
inline idx_labels read_idx_labels(const std::string& path) {
  detail::gz_reader in(path);
  const std::uint32_t magic = in.read_be32("the magic number");
  if (magic != 0x00000801u)
    throw data_error(path + ": bad magic number " + std::to_string(magic) + " (an IDX label file has 2049)");
  const std::uint32_t count = in.read_be32("the label count");
  if (count > (1u << 30)) throw data_error(path + ": implausible label count " + std::to_string(count));
  idx_labels lb;
  in.read_into(lb.labels, count, "the labels");
  if (const std::uint64_t extra = in.rest())
    throw data_error(path + ": " + std::to_string(extra) + " bytes after the " + std::to_string(count) +
                     " labels the header announces (is the header's label count wrong?)");
  return lb;
}

/// A labelled image set: pixels scaled to [0, 1], labels in [0, classes).
struct labelled_images {
  ///@{
  /// The number of images and each one's rows and columns.
  std::uint32_t count = 0, rows = 0, cols = 0;
  ///@}
  std::vector<float> pixels;  ///< count rows cols values in [0, 1] (grey level / 255), row-major per image
  std::vector<std::uint8_t> labels;  ///< image i's class, below the class count
};

/// Read an image file and its label file; they must agree in count, labels must be < classes.
inline labelled_images load_labelled(const std::string& images, const std::string& labels, unsigned classes = 10) {
  const auto im = read_idx_images(images);
  auto lb = read_idx_labels(labels);
  if (lb.labels.size() != im.count)
    throw data_error(images + " holds " + std::to_string(im.count) + " images but " + labels + " holds " +
                     std::to_string(lb.labels.size()) + " labels");
  for (std::size_t i = 0; i < lb.labels.size(); ++i)
    if (lb.labels[i] >= classes)
      throw data_error(labels + ": label " + std::to_string(lb.labels[i]) + " of sample " + std::to_string(i) +
                       " is not below " + std::to_string(classes));
  labelled_images out{im.count, im.rows, im.cols, std::vector<float>(im.pixels.size()), std::move(lb.labels)};
  for (std::size_t p = 0; p < im.pixels.size(); ++p) out.pixels[p] = static_cast<float>(im.pixels[p]) * (1.0f / 255.0f);
  return out;
}

/// Fashion-MNIST's train and test sets from a directory with the four standard .gz files.
struct fashion_mnist {
  ///@{
  /// The 60,000 training and 10,000 test images.
  labelled_images train, test;
  ///@}
};

/// Fashion-MNIST's training and test sets from the four .gz files in `dir` (by default Debian's
/// dataset-fashion-mnist directory). Throws data_error when the directory is missing or not a
/// directory, or a file is missing or malformed.
inline fashion_mnist load_fashion_mnist(const std::string& dir = default_fashion_mnist_dir()) {
  const std::filesystem::path d(dir);
  std::error_code ec;
  const auto type = std::filesystem::status(d, ec).type();
  if (ec && type != std::filesystem::file_type::not_found)  // a name too long, a symbolic-link loop, ...
    throw data_error("data directory " + dir + ": " + ec.message());
  if (type != std::filesystem::file_type::directory && type != std::filesystem::file_type::not_found)
    throw data_error("data directory " + dir + " is not a directory");
  if (type == std::filesystem::file_type::not_found)
    throw data_error("data directory " + dir + " does not exist (install the Debian package dataset-fashion-mnist "
                     "or pass --data DIR)");
  const auto& f = fashion_mnist_file_names;
  fashion_mnist fm{load_labelled((d / f[0]).string(), (d / f[1]).string()),
                   load_labelled((d / f[2]).string(), (d / f[3]).string())};
  if (fm.train.rows != fm.test.rows || fm.train.cols != fm.test.cols)
    throw data_error(dir + ": train images are " + std::to_string(fm.train.rows) + "x" + std::to_string(fm.train.cols) +
                     " but test images are " + std::to_string(fm.test.rows) + "x" + std::to_string(fm.test.cols));
  return fm;
}

}  // namespace v0
}  // namespace sparsepush
