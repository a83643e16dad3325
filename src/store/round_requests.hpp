// RoundRequests: which rows each trainer of a round asks each owner for. A
// producer turns its trainers' batches into per-owner request lists (in each
// trainer's request order: tables ascending, then its unique keys ascending);
// with several producers they swap the lists of each other's owners by one
// all-to-all per round, so that every producer ends up with, for each trainer
// it feeds, the requests of every trainer of the job. The owners' directories
// de-duplicate them across trainers (the per-node de-duplication).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/collectives.hpp"
#include "data/batch.hpp"
#include "store/row_key.hpp"

namespace strata::store {

// One owner's requests in one round: requester r's rows are
// ids[offsets[r], offsets[r + 1]), in r's request order.
struct OwnerRequests {
  std::vector<RowId> ids;
  std::vector<int32_t> offsets;  // (trainers + 1)
  size_t requests_of(int requester) const { return size_t(offsets[requester + 1] - offsets[requester]); }
};

// The rows of `batch` (of trainer `requester`) owned by each trainer, appended
// to that owner's requests (requesters must come in rank order).
void append_requests(const data::Batch& batch, int trainers, std::vector<OwnerRequests*>& by_owner);

class RoundExchange {
 public:
  // Trainer t is fed by producer t % producers, as its (t / producers)-th trainer.
  RoundExchange(int producer, int producers, int trainers, MPI_Comm producers_comm);

  // Collective over producers (none with one producer): batches are this
  // producer's trainers' batches of the round, in order. Fills per_owner (one
  // per trainer this producer feeds). ok: this producer built the round;
  // lagging: it wants the Scheme A fallback. Returns false on every producer
  // when any could not build the round; any_lagging is the same on all.
  bool exchange(bool ok, bool lagging, const std::vector<data::Batch>& batches,
                std::vector<OwnerRequests>& per_owner, bool& any_lagging, const comm::Service& service = {});

 private:
  int producer_, producers_, trainers_;
  MPI_Comm comm_;
  std::vector<std::vector<char>> outgoing_;  // per producer
  std::vector<char> send_, receive_;
  std::vector<int> send_bytes_, receive_bytes_;
};

}  // namespace strata::store
