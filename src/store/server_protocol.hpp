// The trainer <-> server protocol. Servers work in rounds: in each round every
// trainer sends exactly one request, all of the same op. Pull rounds answer each
// trainer as its request arrives; a push round sums gradients in trainer-rank
// order before applying them, which keeps sums independent of arrival order.
#pragma once

#include <cstdint>

namespace strata::store {

enum class ServerOp : uint32_t {
  kPullTrain = 1,  // payload: per-table counts (u32, T), keys (u64); reply: values (n, dim)
  kPullEval = 2,   // same, rows are not created
  kPush = 3,       // payload: gradients (n, dim) in the order of this step's pull
  kDump = 4,       // reply to trainer 0 only: ids, counts and rows in canonical order
  kStop = 5,       // the server leaves its loop
  kCheckpoint = 6, // payload: runtime::CheckpointStamp; every rank then writes its part of a checkpoint
};

struct RequestHeader {
  ServerOp op;
  uint32_t num_tables;
  int64_t step;
};

}  // namespace strata::store
