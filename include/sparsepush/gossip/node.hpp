// sparsepush/gossip/node.hpp: one push-sum node, the unit of the library: the class
// push_sum_node (push_sum_node.hpp, with the round's equations) and its long member functions,
// defined out of the class: validation, mixing and the checkpoint section (detail/node_*.hpp).
#pragma once

#include "push_sum_node.hpp"
#include "detail/node_checks.hpp"
#include "detail/node_mix.hpp"
#include "detail/node_checkpoint.hpp"
