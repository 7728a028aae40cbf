// sparsepush/config.hpp: version, ABI namespace and the one error hierarchy of the library.
// Every failure the library reports is a sparsepush::error that names what was wrong and where
// (node, round, index, sizes); validation happens at boundaries, kernels trust validated input.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#define SPARSEPUSH_VERSION_MAJOR 0
#define SPARSEPUSH_VERSION_MINOR 6
#define SPARSEPUSH_VERSION_PATCH 0

/// A read prefetch hint (nothing where the compiler offers none).
#if defined(__GNUC__) || defined(__clang__)
#define SPARSEPUSH_PREFETCH(p) __builtin_prefetch(p)
#else
#define SPARSEPUSH_PREFETCH(p) ((void)0)
#endif

namespace sparsepush {
inline namespace v0 {

/// Base of every exception thrown by sparsepush.
class error : public std::runtime_error {
 public:
  explicit error(const std::string& what) : std::runtime_error("sparsepush: " + what) {}
};

/// A parameter or configuration value is out of range (k, fraction, levels, spec string...).
class config_error : public error {
 public:
  using error::error;
};

/// Two tensors that must agree in size do not, or a size exceeds what the wire format holds.
class size_error : public error {
 public:
  using error::error;
};

/// An input tensor holds NaN or +-Inf; index() is the first offending position.
class non_finite_error : public error {
 public:
  non_finite_error(const std::string& what, std::size_t index) : error(what), index_(index) {}
  std::size_t index() const noexcept { return index_; }

 private:
  std::size_t index_;
};

/// A byte buffer is not a valid encoded message; offset() is where decoding stopped.
class decode_error : public error {
 public:
  decode_error(const std::string& what, std::size_t offset)
      : error("decode: " + what + " (at byte " + std::to_string(offset) + ")"), offset_(offset) {}
  std::size_t offset() const noexcept { return offset_; }

 private:
  std::size_t offset_;
};

/// A message breaks the wire format's rules (sizes, count, indices, values): validate() found it
/// (a compressor wrote it wrong). The text says what and where (index position, sizes).
class message_error : public error {
 public:
  using error::error;
};

/// Where a compression happens: the seed of the run, the node and the round. Every random
/// choice is a pure function of (seed, node, round, position), so runs are bit-reproducible
/// whatever the thread count or transport.
struct context {
  std::uint64_t seed = 0;
  std::uint32_t node = 0;
  std::uint32_t round = 0;

  std::string where() const {
    return "node " + std::to_string(node) + ", round " + std::to_string(round);
  }
};

}  // namespace v0
}  // namespace sparsepush
