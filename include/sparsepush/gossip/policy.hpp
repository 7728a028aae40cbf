// sparsepush/gossip/policy.hpp: how long a node waits for its in-neighbours' envelopes before it
// mixes (docs/design/algorithms.md, "Asynchronous and overlapped push-sum"). In round t, after its local step,
// compression and post, a node mixes what has arrived; the policy says what it must wait for:
//   lockstep            every envelope of round t (staleness 0: today's round, and its bits)
//   overlap             exactly the envelopes of round t - 1, none of round t: the sends of round t
//                       travel while the next gradient is computed; deterministic on every transport
//   staleness tau >= 1  everything that has arrived, waiting only for the envelopes of rounds <= t - tau
//   asynchronous        everything that has arrived, never waiting (liveness is still checked)
// A receiver holds at most inbox_rounds() rounds of envelopes per in-neighbour: a sender that
// would exceed that waits, so memory stays bounded however far apart the nodes drift.
// Under delays a node's push-sum weight u_i can collapse (it keeps sending its share while what it
// is owed is in flight), which would amplify its local step by 1/u_i: in every policy but lockstep
// a node below gossip_options::step_weight_floor scales its step (push_sum_group::deferred_step_of).
// The policy value (wait_policy, parse_staleness, to_string) lives with the transports that size
// their inboxes from it: transport/wait_policy.hpp.
#pragma once

#include "../transport/wait_policy.hpp"
