// sparsepush/config.hpp: version, ABI namespace and the one error hierarchy of the library.
// Every failure the library reports is a sparsepush::error that names what was wrong and where
// (node, round, index, sizes); validation happens at boundaries, kernels trust validated input.
/// @file
/// The library's version, the exceptions every failure is reported with (sparsepush::error and its
/// kinds) and the context of a compression (sparsepush::context).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

/// The major part of the library's version (the CMake package's version is read from these three).
#define SPARSEPUSH_VERSION_MAJOR 0
/// The minor part of the library's version.
#define SPARSEPUSH_VERSION_MINOR 6
/// The patch part of the library's version.
#define SPARSEPUSH_VERSION_PATCH 1

/// A read prefetch hint (nothing where the compiler offers none).
#if defined(__GNUC__) || defined(__clang__)
#define SPARSEPUSH_PREFETCH(p) __builtin_prefetch(p)
#else
#define SPARSEPUSH_PREFETCH(p) ((void)0)
#endif

/// The sparsepush library. Every name is declared in the inline namespace v0 (the ABI version), so
/// sparsepush::top_k and sparsepush::v0::top_k name the same type; write the former.
namespace sparsepush {
/// The ABI version of the library's names (inline: sparsepush::name reaches them).
inline namespace v0 {

/// Base of every exception thrown by sparsepush.
class error : public std::runtime_error {
 public:
  /// The exception with message "sparsepush: " followed by `what`.
  explicit error(const std::string& what) : std::runtime_error("sparsepush: " + what) {}
};

/// A parameter or configuration value is out of range (k, fraction, levels, spec string...).
class config_error : public error {
 public:
  /// Inherits error's constructor: the message is "sparsepush: " followed by `what`.
  using error::error;
};

/// Two tensors that must agree in size do not, or a size exceeds what the wire format holds.
class size_error : public error {
 public:
  /// Inherits error's constructor: the message is "sparsepush: " followed by `what`.
  using error::error;
};

/// An input tensor holds NaN or +-Inf; index() is the first offending position.
class non_finite_error : public error {
 public:
  /// `what` names the tensor and the check; `index` is the first position holding NaN or infinity.
  non_finite_error(const std::string& what, std::size_t index) : error(what), index_(index) {}
  /// Position of the first NaN or infinity in the tensor that was checked.
  std::size_t index() const noexcept { return index_; }

 private:
  std::size_t index_;
};

/// A byte buffer is not a valid encoded message; offset() is where decoding stopped.
class decode_error : public error {
 public:
  /// `what` says what is wrong; `offset` is the byte at which decoding stopped (also in the message).
  decode_error(const std::string& what, std::size_t offset)
      : error("decode: " + what + " (at byte " + std::to_string(offset) + ")"), offset_(offset) {}
  /// The byte offset at which decoding stopped.
  std::size_t offset() const noexcept { return offset_; }

 private:
  std::size_t offset_;
};

/// A message breaks the wire format's rules (sizes, count, indices, values): validate() found it
/// (a compressor wrote it wrong). The text says what and where (index position, sizes).
class message_error : public error {
 public:
  /// Inherits error's constructor: the message is "sparsepush: " followed by `what`.
  using error::error;
};

/// Where a compression happens: the seed of the run, the node and the round. Every random
/// choice is a pure function of (seed, node, round, position), so runs are bit-reproducible
/// whatever the thread count or transport.
struct context {
  std::uint64_t seed = 0;  ///< the run's seed, shared by every node
  std::uint32_t node = 0;  ///< the node that compresses (0-based)
  std::uint32_t round = 0;  ///< the round being compressed (0-based)

  /// "node N, round R": where an error happened, for messages.
  std::string where() const {
    return "node " + std::to_string(node) + ", round " + std::to_string(round);
  }
};

}  // namespace v0
}  // namespace sparsepush
