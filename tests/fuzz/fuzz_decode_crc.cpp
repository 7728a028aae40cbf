// Fuzz target: decode() and decode_envelope() after the checksum is recomputed over the mutated
// bytes (bytes 28..31 of a message, 24 + 28..31 of an envelope frame), so that mutations of the
// header fields, indices and values reach the structure checks instead of the CRC mismatch.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "decode_checks.hpp"

namespace {
void fix_crc(std::span<std::byte> msg) {
  if (msg.size() >= sparsepush::message_header_bytes) sparsepush::detail::seal(msg);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* bytes = reinterpret_cast<const std::byte*>(data);
  std::vector<std::byte> msg(bytes, bytes + size);
  fix_crc(msg);
  sparsepush_fuzz::check_decode(msg);

  std::vector<std::byte> frame(bytes, bytes + size);
  if (frame.size() > sparsepush::envelope_header_bytes)
    fix_crc(std::span<std::byte>(frame).subspan(sparsepush::envelope_header_bytes));
  sparsepush_fuzz::check_decode_envelope(frame);
  return 0;
}
