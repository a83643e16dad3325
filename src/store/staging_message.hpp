// Wire forms of the tiered store's row traffic: a staging plan with the rows to
// insert (producer -> owner trainer, bundled with that trainer's batch of the
// same round) and a write-back of dirty rows (owner trainer -> producer,
// producer -> server).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/row_key.hpp"

namespace strata::store {

struct RowBlock {
  int width = 0;
  std::vector<RowId> ids;      // (n)
  std::vector<float> values;   // (n, width): values then optimizer state
  size_t size() const { return ids.size(); }
  void clear() { ids.clear(), values.clear(); }
  void append(const RowId& id, const float* row) {
    ids.push_back(id);
    values.insert(values.end(), row, row + width);
  }
  const float* row(size_t i) const { return values.data() + i * width; }
};

// The producer's cumulative level counters, carried with each staging plan so
// that trainer 0 can put them in metrics.jsonl without another message.
enum ProducerStat { kStatL1Hits, kStatL1Misses, kStatL1Evictions, kStatL2Hits, kStatL2Misses, kStatL2Evictions,
                    kStatL2WriteBacks, kStatFallbackRows, kStatBytesL3ToL2, kStatBytesL2ToL3, kStatStagingS,
                    kStatL1Mb, kStatL2Mb, kStatPrefetchDepth, kProducerStats };
const char* producer_stat_name(int stat);

struct StagingMessage {
  int64_t round = -1;          // -1: no staging (ps mode)
  // Scheme A fallback: from this round on the trainers flush their L1s and
  // reach rows on the servers; nothing is staged for this round.
  bool switch_to_ps = false;
  std::vector<RowId> evict;
  RowBlock insert;
  std::vector<uint8_t> insert_dirty;  // (insert.size()) 1: newer than the servers' copy (came from L2 dirty)
  double stats[kProducerStats] = {};
  std::string note;            // an online controller decision made for this round ("" if none)
};

void append_staging(const StagingMessage& message, std::vector<char>& out);
StagingMessage read_staging(const char* data, size_t size);

void append_row_block(const RowBlock& block, std::vector<char>& out);
RowBlock read_row_block(const char* data, size_t size, size_t* consumed = nullptr);

}  // namespace strata::store
