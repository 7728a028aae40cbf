// sparsepush/sparsepush.hpp: the umbrella header of the core library. It includes no optional
// dependency; Eigen and xtensor support live in sparsepush/adapters/.
#pragma once

#include "config.hpp"
#include "tensor.hpp"
#include "message.hpp"
#include "error_feedback.hpp"
#include "compress/common.hpp"
#include "compress/values.hpp"
#include "compress/identity.hpp"
#include "compress/top_k.hpp"
#include "compress/random_k.hpp"
#include "compress/qsgd.hpp"
#include "compress/sign.hpp"
#include "compress/threshold.hpp"
#include "compress/compose.hpp"
