// Messages of the tiered store beside the batch stream: trainers write evicted
// and flushed rows back to their producer; producers fetch rows from and write
// rows back to the servers (L3) outside the trainers' server rounds.
#pragma once

#include <cstdint>

namespace strata::store {

enum class WriteBackKind : uint32_t {
  kRound = 1,  // the dirty rows evicted by one round's staging plan (maybe none)
  kFlush = 2,  // every dirty row, at the end of training
  kCheckpoint = 3,  // every dirty row, written down for a checkpoint (the rows stay cached, clean)
  kWriteDownPart = 4,  // a part of a flush or checkpoint write-down; its last part is the kFlush or kCheckpoint
};

struct WriteBackHeader {
  WriteBackKind kind;
  int64_t round;
  // kRound: how long the trainer waited for this round's batch. The producer
  // counts a round late when a trainer waited longer than kLateWaitSeconds.
  double batch_wait_s = 0;
};

// A trainer that waited longer than this for a round's batch had run dry:
// staging (or the sample stream) was not ahead of it.
constexpr double kLateWaitSeconds = 1e-3;

// Producer -> server requests (tag kTagProducerRequest), served as they arrive.
enum class ProducerOp : uint32_t {
  kFetch = 1,      // payload: ids; reply: full rows (values + state), created if new
  kWriteBack = 2,      // payload: row block; no reply (MPI keeps one source's messages in order,
                       // so a later fetch from the same producer sees it)
  kWriteBackSync = 3,  // the same, answered by an empty acknowledgement (the final flush)
};

}  // namespace strata::store
