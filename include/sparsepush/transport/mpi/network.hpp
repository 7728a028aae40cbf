// sparsepush/transport/mpi/network.hpp: nodes on MPI ranks (optional component sparsepush::mpi):
// mpi_network, n nodes over a communicator, and mpi_endpoint, one node's link to it. The class is
// declared in network_class.hpp; its members are defined by concern in detail/: construction and
// the waits, the send queue, the lockstep collect and the deferred mode's inbox. Below the
// includes, how the network places nodes, tags frames and waits.
#pragma once

#include "network_class.hpp"
#include "detail/network_setup.hpp"
#include "detail/send_queue.hpp"
#include "detail/lockstep_collect.hpp"
#include "detail/deferred_inbox.hpp"

// Placement: the n nodes are cut into contiguous blocks, rank r hosting
// [r*b + min(r, e), ...) with b = n / R and e = n % R (the first e ranks host one more).
// An envelope to a node on another rank travels as exactly its frame, the 24-byte envelope
// header then encode(q) (endpoint.hpp), in one nonblocking send whose tag carries the round
// and the receiver (tag = (round mod M) * B + receiver's index in its block, B the largest block).
// The byte ledger counts every frame between nodes, on one rank or across, so summaries match an
// in-process run. Two-sided point-to-point only, no blocking send, no collective in a round.
// Two modes, chosen by mpi_options::policy (transport/wait_policy.hpp):
//  * lockstep (the default): MPI_Isend; collect(round) sizes each message with MPI_Improbe /
//    MPI_Mrecv on its tag and expects exactly its in-neighbours of that round, as the schedule
//    says. Edges between nodes on one rank never touch MPI (the message is passed by reference,
//    as loopback's by_reference mode: the ranks' drivers run their nodes in lockstep).
//  * deferred (every other policy; gossip/policy.hpp, asynchronous and overlapped push-sum): a
//    node mixes envelopes of earlier rounds, so post() copies a delivery on its own rank into the
//    receiver's pending list, and sends the others with MPI_Issend (complete once the receiver has
//    matched it). A sender keeps at most policy.inbox_rounds() = W unmatched envelopes per receiver;
//    posting one more waits (receiving meanwhile) up to the timeout. take() receives whatever has
//    arrived for this rank's nodes (MPI_Improbe(ANY_SOURCE, ANY_TAG) + MPI_Imrecv, so that a large
//    frame whose sender is computing never blocks the receiver: the receiver from the tag, the
//    round and sender from the header, checked against the tag and the source rank) into per-node
//    pending lists, and hands over a node's envelopes of rounds <= upto, ascending by (round,
//    sender); it waits only for the envelopes it must have, and checks liveness on the ones it
//    expects. (Over TCP a large frame still moves only while its sender's rank calls MPI, unless
//    the MPI has a progress thread: Open MPI's --mca btl_tcp_progress_thread 1.) Every wait loop
//    (take, the window, finish, wait) receives too, so that ranks waiting on each other progress.
//    W must be below M (no two rounds of one window share a tag). The pending lists are bounded
//    by what arrives between a node's takes, not by W: a receiver that takes only rounds <= its
//    own while its senders run ahead keeps their later rounds (see largest_pending()).
// Waiting blocks, it does not poll: every wait loop tests, then sleeps with a backoff (20 us,
// doubling up to 1 ms), its deadline taken from MPI_Wtime (under SimGrid's SMPI both are simulated
// time: clock.hpp; there the duplications block, see mpi_comm_idup). MPI errors are returned
// (MPI_ERRORS_RETURN on a private duplicate of the communicator) and thrown as mpi_error naming the
// rank, round and peer; a missing envelope becomes a transport_error after a timeout. Every wait
// on other ranks has that timeout: the communicator's duplication (MPI_Comm_idup), agree(),
// finish(), posted_rounds() here, and, through wait(), the collectives of train/mpi.hpp (a stopped
// rank must end the job, not hang it in a collective). agree() checks at start that every rank
// runs the same settings. All MPI calls of a network must come from one thread
// (MPI_THREAD_FUNNELED).

namespace sparsepush {
inline namespace v0 {

static_assert(endpoint<mpi_endpoint>);
static_assert(deferred_endpoint<mpi_endpoint>);

}  // namespace v0
}  // namespace sparsepush
