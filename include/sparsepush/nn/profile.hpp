// sparsepush/nn/profile.hpp: the per-step device profile of the reference backend's models
// (parameters, activation bytes, FLOPs, and the reductions at a lower precision) and the energy
// figures it is estimated with: one multiply-accumulate at B bits (Horowitz, ISSCC 2014) and one bit
// sent over a radio (Barr and Asanovic, MobiSys 2003).
#pragma once

#include <cstddef>

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// Energy of one multiply-accumulate at `bits` of precision, in picojoules, from Horowitz,
/// "Computing's Energy Problem (and what we can do about it)", ISSCC 2014, 45 nm: fp32 mult 3.7 +
/// add 0.9 = 4.6 pJ; int8 mult 0.2 + add 0.03 = 0.23 pJ; fp16 mult 1.1 + add 0.4 = 1.5 pJ.
/// bits 0 or 32: fp32. bits <= 8: the int8 figures scaled as an array multiplier (B/8)^2 and an
/// adder B/8. 8 < bits <= 16: linear between int8 (0.23 pJ) and fp16 (1.5 pJ). Memory accesses
/// (Horowitz: 8 KB SRAM 10 pJ, DRAM 1.3-2.6 nJ per 64 bits) are not counted.
inline double mac_energy_pj(unsigned bits) {
  if (bits == 0 || bits >= 32) return 3.7 + 0.9;
  const double b = double(bits);
  if (bits <= 8) return 0.2 * (b / 8) * (b / 8) + 0.03 * (b / 8);
  return 0.23 + (b - 8) / 8 * (1.5 - 0.23);
}

/// Radio energy per bit sent: 0.86 nJ per ADD x 485 ADDs per bit = 417 nJ/bit, the best link of
/// Barr and Asanovic, "Energy-aware lossless data compression", MobiSys 2003 (802.11b, 5.7 Mb/s).
inline constexpr double radio_joules_per_bit = 485 * 0.86e-9;

/// Communication energy of sending `bytes` over that radio.
inline double communication_energy_joules(double bytes) { return bytes * 8 * radio_joules_per_bit; }

/// The paper's Section 6 device profile, per local step, and its low-precision estimate.
struct device_profile {
  std::size_t parameters = 0;        ///< number of float parameters
  std::size_t activation_bytes = 0;  ///< bytes of activations kept for backward at this batch size (fp32)
  double flops = 0;                  ///< forward + backward FLOPs of one step (a multiply-add is 2)
  unsigned bits = 32;                ///< precision of weights, activations and gradients (32: fp32)
  double memory_reduction = 1;       ///< 32 / bits: weights and activations stored at `bits`
  double compute_reduction = 1;      ///< 32 / bits: operand width of the multiply-adds
  double communication_reduction = 1;  ///< 32 / bits, were the model sent at `bits` per value
  double compute_energy_joules = 0;  ///< flops / 2 multiply-adds at mac_energy_pj(bits)
  double compute_energy_reduction = 1;  ///< mac_energy_pj(32) / mac_energy_pj(bits)
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
