// sparsepush/transport/in_process.hpp: the names the in-process network had before it became the
// per-node loopback (loopback.hpp); kept so that code written against them still compiles.
#pragma once

#include "loopback.hpp"

namespace sparsepush {
inline namespace v0 {

/// The in-process network is the loopback network.
using in_process_network = loopback_network;
/// Its settings.
using in_process_options = loopback_options;

static_assert(transport<in_process_network>);

}  // namespace v0
}  // namespace sparsepush
