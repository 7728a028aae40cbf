// sparsepush/compress/workspace.hpp: the scratch buffers of the built-in compressors and of error
// feedback (v = x + e), owned by the caller (one per node, as CUB's temporary storage): repeated
// calls reuse them, concurrent callers use their own, and capacity_bytes() is counted in a node's
// state. The contents between calls are meaningless, except that `taken` is all zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The bit pattern of |v| as an unsigned integer: monotone in |v| for finite IEEE values.
template <class T>
using magnitude_key = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>;

}  // namespace detail

/// Scratch of the compressors for element type T; pass the same one to every call of a node.
template <tensor_element T>
struct compress_workspace {
  /// The unsigned integer key ordering magnitudes (32 bits for float, 64 for double).
  using key_type = detail::magnitude_key<T>;

  std::vector<std::uint32_t> hist;                         ///< top-K: histogram of key bits
  std::vector<std::pair<key_type, std::uint32_t>> cand;   ///< top-K / threshold: (key, index)
  std::vector<std::uint32_t> chosen;                       ///< top-K: indices above the boundary
  std::vector<std::uint32_t> part;                         ///< per-layer top-K: one segment's picks
  std::vector<std::uint64_t> taken;                        ///< random-K: bitmap, all zero between calls
  std::vector<key_type> keys;                              ///< threshold / top-K: sampled keys
  std::vector<std::uint32_t> sel;                          ///< threshold / top-K: selected indices
  std::vector<key_type> ckeys;                             ///< top-K: keys of the candidates in sel
  std::vector<std::byte> bytes;                            ///< sign: the payload, until v is known finite
  std::vector<T> v;                                        ///< error feedback: v = x + e

  /// Bytes held by the buffers (capacity, not size).
  std::size_t capacity_bytes() const noexcept {
    return hist.capacity() * sizeof(std::uint32_t) + cand.capacity() * sizeof(std::pair<key_type, std::uint32_t>) +
           chosen.capacity() * sizeof(std::uint32_t) + part.capacity() * sizeof(std::uint32_t) +
           taken.capacity() * sizeof(std::uint64_t) + keys.capacity() * sizeof(key_type) +
           sel.capacity() * sizeof(std::uint32_t) + ckeys.capacity() * sizeof(key_type) +
           bytes.capacity() + v.capacity() * sizeof(T);
  }
};

}  // namespace v0
}  // namespace sparsepush
