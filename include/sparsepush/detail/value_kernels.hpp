// sparsepush/detail/value_kernels.hpp: the vector kernels of the dense value encodings (wire.hpp)
// and of Philox4x32-R, R = 10 or 7 (philox.hpp), each beside the scalar definition it must match bit for bit:
//   lane_sum: sum_j t_j in double as 32 interleaved partial sums (lane j mod 32, in order of j),
//             combined by the fixed tree s[L] += s[L + w], w = 16, 8, 4, 2, 1. It defines ||v||_1 of
//             the sign encoding and ||v||_2^2 of QSGD (a single running sum would be a 4-cycle add
//             chain per element; a fixed lane order keeps every level bit-identical);
//   sign bits: bit j set when v_j < 0;
//   philox_fill: the words of blocks b0 .. b0 + n - 1 of a counter_rng, in order;
//   qsgd codes: l = floor(r) + (xi < r - floor(r)), r = |v| * (s / nrm), min(l, s), code = l << 1 | (v < 0),
//             xi = (w >> 8) / 2^24 from word j of the stream (24-bit draws), or with 16-bit draws
//             xi = h / 2^16, h the 16-bit half j of the stream's words read as little-endian
//             halves (coordinate 2i: the low half of word i, 2i + 1: its high half).
// The vector versions cover float tensors; double tensors use the scalar definitions.
// The kernels live by concern in lane_sum_kernels.hpp, philox_kernels.hpp and qsgd_kernels.hpp;
// this header gathers them.
#pragma once

#include "lane_sum_kernels.hpp"
#include "philox_kernels.hpp"
#include "qsgd_kernels.hpp"
