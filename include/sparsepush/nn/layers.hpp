// sparsepush/nn/layers.hpp: the layers of the reference CPU training backend (layers/), each a
// small struct with forward/backward templated on the scalar: dense, conv2d, pooling, ReLU and
// flatten, GroupNorm (with its fused ReLU-max-pool pass), EvoNorm-S0 and Range-EvoNorm, and the
// softmax cross-entropy. Activations are NCHW, sample-major.
#pragma once

#include "layers/common.hpp"
#include "layers/dense.hpp"
#include "layers/conv2d.hpp"
#include "layers/pooling.hpp"
#include "layers/activations.hpp"
#include "layers/group_norm.hpp"
#include "layers/evo_norm.hpp"
#include "layers/loss.hpp"
