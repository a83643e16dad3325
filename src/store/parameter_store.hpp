// ParameterStore: how a trainer reaches the sparse rows of its batch. Scheme A
// (RemotePsStore) pulls every row from the servers each step; Scheme B (tiered)
// serves the same calls from its cache levels. Both must produce the same numbers.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/batch.hpp"
#include "store/row_key.hpp"

namespace strata::store {

// Traffic one trainer caused on each link, in rows and bytes.
struct LinkTraffic {
  uint64_t rows_pulled = 0;
  uint64_t bytes_pulled = 0;   // server -> trainer (network)
  uint64_t rows_pushed = 0;
  uint64_t bytes_pushed = 0;   // trainer -> server (network)
  uint64_t bytes_requested = 0;  // trainer -> server key lists
  double pull_wait_s = 0;      // time blocked waiting for rows
};

// All rows of the model in canonical (table, key) order, for digests.
struct RowDump {
  int width = 0;                // floats per row: values then optimizer state
  std::vector<RowId> ids;       // (n)
  std::vector<float> values;    // (n, width)
  std::vector<uint64_t> counts; // (n) access counts
};

class ParameterStore {
 public:
  virtual ~ParameterStore() = default;
  virtual const char* mode() const = 0;

  // The staging plan that came with the next batch (tiered mode); applied in
  // arrival order, before the step of that batch runs.
  virtual void stage(const char* /*staging*/, size_t /*bytes*/, double /*batch_wait_s*/) {}
  // rows[t] <- (U_t, dim) current values of batch.tables[t].unique_keys.
  // Training pulls create missing rows; evaluation pulls never store anything.
  virtual void pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) = 0;
  // This trainer's partial gradients grads[t] (U_t, dim) of the rows it pulled for training.
  virtual void push(const data::Batch& batch, const std::vector<std::vector<float>>& grads) = 0;
  // Collective over trainers: writes every cached row down to the servers (after training).
  virtual void flush() {}
  // Checkpoint, step 1: cached dirty rows start down towards the servers (they
  // stay cached, clean); the producer completes it before it answers "ready".
  virtual void prepare_checkpoint(int64_t /*step*/) {}
  // Checkpoint, step 2: a kCheckpoint round tells every server to join the write.
  virtual void checkpoint_servers(const void* stamp, size_t bytes) = 0;
  // Collective over trainers: returns every row on trainer 0 (empty elsewhere).
  virtual RowDump dump_rows() = 0;
  // Collective over trainers: releases the store's ranks (servers exit their loop).
  virtual void shutdown() = 0;

  // Decisions of the online controller since the last call (tiered mode, the
  // first trainer of each producer), for metrics.jsonl.
  virtual std::vector<std::string> take_notes() { return {}; }

  // Cumulative per-level counters for metrics.jsonl, as (name, value) pairs in
  // a fixed order (the same on every trainer). Empty in ps mode.
  virtual std::vector<std::pair<const char*, double>> level_stats() const { return {}; }

  const LinkTraffic& traffic() const { return traffic_; }

 protected:
  LinkTraffic traffic_;
};

}  // namespace strata::store
