// Collectives for the engine's roles, all started non-blocking and completed
// by a polite wait (comm::Backoff): on oversubscribed cores a rank that waits
// in a blocking MPI call spins (Open MPI yields in a loop), burning the core
// the rank it waits for needs. `service`, when given, runs between polls so a
// producer keeps answering its trainers while it waits for its peers. Every
// wait is watched by the stall watchdog (comm/stall_watchdog.hpp) when armed.
#pragma once

#include <mpi.h>

#include <functional>
#include <vector>

#include "comm/mpi_channel.hpp"

namespace strata::comm {

using Service = std::function<void()>;

// Waits for `request`, sleeping between tests as `pace` says; returns seconds waited.
double wait(MPI_Request& request, const Service& service = {}, const Pace& pace = {});

// The pace of a rank that has finished its own work and waits for the others
// (the end of a job): a late wake costs nothing, a poll every 200 us costs the
// cores the others still train on.
inline constexpr Pace kFinishedPace{3, 5, 2000};

// Returns once every rank of comm has called it.
void barrier(MPI_Comm comm, const Pace& pace = {});

// data (count of type) <- root's, on every rank of comm.
void broadcast(void* data, int count, MPI_Datatype type, int root, MPI_Comm comm);

// Before a blocking collective that MPI has no non-blocking form of (making a
// communicator, a shared window): a polite barrier, so that the ranks enter it
// together instead of the early ones spinning in it on the cores the late ones
// need (measured: 4 % of a co-trained tuner pass's CPU in MPI_Comm_split_type).
inline void arrive_together(MPI_Comm comm) { barrier(comm); }

// The ranks of comm that share this rank's node (its shared-memory domain), so its
// cores and memory. Collective over comm.
int ranks_on_node(MPI_Comm comm);

// In place: data (count of type) <- op over every rank of comm.
void allreduce(void* data, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, const Service& service = {},
               const Pace& pace = {});

// In place: data (count floats) <- the sum over every rank of comm, added in rank
// order, ((x0 + x1) + x2) + ..., whatever the rank count and MPI's algorithms: so a
// sum whose terms live on other ranks in another layout can be made bit-identical.
// Costs what a ring all-reduce moves: an all-to-all of the blocks (rank q folds
// block q) and an all-gather of the folded blocks.
void ordered_allreduce_sum(float* data, int count, MPI_Comm comm, const Service& service = {});

// recv (count of type, on root only) <- op over every rank's send.
void reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm);

// Every rank's `bytes` bytes (the same count on all), back to back in rank order, on every rank.
void allgather_bytes(const void* send, int bytes, void* receive, MPI_Comm comm);

// Every rank's bytes, back to back in rank order, on root (empty elsewhere).
std::vector<char> gather_bytes(const void* send, int bytes, int root, MPI_Comm comm, const Pace& pace = {});

// All-to-all of bytes where every rank knows what it sends to and receives
// from each peer: send holds the peers' parts back to back (send_bytes[r] for
// rank r), receive gets them back to back in rank order.
void alltoallv(const void* send, const std::vector<int>& send_bytes, void* receive,
               const std::vector<int>& receive_bytes, MPI_Comm comm, const Service& service = {});

// The same when the receiver does not know the sizes: they are exchanged
// first; receive and receive_bytes are resized and filled.
void alltoallv_sized_here(const std::vector<char>& send, const std::vector<int>& send_bytes,
                          std::vector<char>& receive, std::vector<int>& receive_bytes, MPI_Comm comm,
                          const Service& service = {});

// Total of the counts, checked against MPI's int limit (names what overflowed).
int total_bytes(const std::vector<int>& counts, const char* what);

}  // namespace strata::comm
