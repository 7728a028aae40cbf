// sparsepush/gossip/group.hpp: n push-sum nodes exchanging compressed messages over a schedule:
// the class push_sum_group (push_sum_group.hpp, with the round's equations) and its members
// defined out of the class: deferred rounds and the drain, the checkpoint sections
// (detail/group_*.hpp).
#pragma once

#include "push_sum_group.hpp"
#include "detail/group_deferred.hpp"
#include "detail/group_checkpoint.hpp"
