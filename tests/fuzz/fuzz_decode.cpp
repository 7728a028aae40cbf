// Fuzz target: decode() and decode_envelope() on the bytes as they come. Almost every mutation
// fails the checksum here; fuzz_decode_crc repairs it to reach the checks behind it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "decode_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> buf(reinterpret_cast<const std::byte*>(data), size);
  sparsepush_fuzz::check_decode(buf);
  sparsepush_fuzz::check_decode_envelope(buf);
  return 0;
}
