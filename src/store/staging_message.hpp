// Wire forms of the tiered store's row traffic: a staging plan (producer ->
// owner trainer, appended to that trainer's batch of the same round) and a
// block of full rows (write-backs: owner trainer -> producer -> server).
//
// A staging plan addresses the owner's L1 by slot: the producer mirrors every
// L1 exactly (L1Directory), so it tells the trainer which slots to empty, which
// rows to put in which slots, and, for every trainer that needs rows of this
// owner in the round, the slots of those rows in that trainer's request order.
// The trainers then exchange row values and gradients without exchanging keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/wire.hpp"
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
                    kStatL1Mb, kStatL2Mb, kStatPrefetchDepth, kStatStagingCpuS, kProducerStats };
const char* producer_stat_name(int stat);

// A staging plan as the trainer reads it: views into the received message.
struct StagingView {
  int64_t round = -1;
  bool switch_to_ps = false;  // Scheme A from this round on: flush L1, reach rows on the servers
  int width = 0;              // floats per staged row
  comm::Span<int32_t> evict_slots;    // slots to empty (dirty rows are written back first)
  comm::Span<int32_t> insert_slots;   // (n) where each staged row goes
  comm::Span<RowId> insert_ids;       // (n)
  comm::Span<uint8_t> insert_dirty;   // (n) 1: newer than the servers' copy (came from L2 dirty)
  comm::Span<float> insert_values;    // (n, width)
  comm::Span<int32_t> serve_offsets;  // (trainers + 1) trainer r's rows: serve_slots[offsets[r], offsets[r + 1])
  comm::Span<int32_t> serve_slots;    // L1 slots, in each requester's request order
  const double* stats = nullptr;      // (kProducerStats)
  std::string note;                   // an online controller decision made for this round ("" if none)
};

// Writes a staging plan into `out` (appended), in parts: the producer fills
// the row arrays in place (no intermediate copy) through the returned offsets.
class StagingWriter {
 public:
  StagingWriter(std::vector<char>& out, int64_t round, bool switch_to_ps, int width);
  void evict_slots(const std::vector<int32_t>& slots);
  // Room for n staged rows; fill through insert_*() after every part is written.
  void reserve_inserts(size_t n);
  void serve(const std::vector<int32_t>& offsets, const std::vector<int32_t>& slots);
  void finish(const double* stats, const std::string& note);

  int32_t* insert_slots() { return at<int32_t>(slots_at_); }
  RowId* insert_ids() { return at<RowId>(ids_at_); }
  uint8_t* insert_dirty() { return at<uint8_t>(dirty_at_); }
  float* insert_values() { return at<float>(values_at_); }

 private:
  template <class T>
  T* at(size_t offset) { return reinterpret_cast<T*>(out_.data() + offset); }
  std::vector<char>& out_;
  int width_;
  size_t slots_at_ = 0, ids_at_ = 0, dirty_at_ = 0, values_at_ = 0;
};

// `data` must be 8-aligned (the batch message puts attachments there).
StagingView read_staging(const char* data, size_t size);

// A row block starts at an 8-aligned offset of its message (the writer pads);
// a reader of the message skips to it (ByteReader::skip_padding(8)) first.
void append_row_block(const RowBlock& block, std::vector<char>& out);
RowBlock read_row_block(const char* data, size_t size, size_t* consumed = nullptr);

}  // namespace strata::store
