#include "store/staging_message.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace strata::store {

void append_row_block(const RowBlock& block, std::vector<char>& out) {
  // Grown to fit at once: a write-down part into a fresh buffer would otherwise
  // double past it (up to 2x the bytes the write-down bounds in flight).
  const size_t needed = out.size() + 64 + block.ids.size() * sizeof(RowId) + block.values.size() * sizeof(float);
  if (out.capacity() < needed) out.reserve(std::max(needed, 2 * out.size()));
  comm::ByteWriter writer(out);
  writer.align(8);  // a block starts 8-aligned, where its reader starts counting
  writer.put<int32_t>(block.width);
  writer.put_vector(block.ids);
  writer.put_vector(block.values);
}

RowBlock read_row_block(const char* data, size_t size, size_t* consumed) {
  comm::ByteReader reader(data, size, "row block");
  RowBlock block;
  block.width = reader.get<int32_t>();
  reader.get_vector(block.ids);
  reader.get_vector(block.values);
  if (block.width < 0 || block.values.size() != block.ids.size() * static_cast<size_t>(block.width)) {
    throw Error("row block: " + std::to_string(block.values.size()) + " values for " +
                std::to_string(block.ids.size()) + " rows of width " + std::to_string(block.width));
  }
  if (consumed) *consumed = size - reader.remaining();
  return block;
}

const char* producer_stat_name(int stat) {
  static const char* names[kProducerStats] = {"l1_hits", "l1_misses", "l1_evictions", "l2_hits",
                                              "l2_misses", "l2_evictions", "l2_write_backs", "fallback_rows",
                                              "bytes_l3_to_l2", "bytes_l2_to_l3", "staging_s",
                                              "l1_mb", "l2_mb", "prefetch_depth", "staging_cpu_s"};
  return names[stat];
}

// Layout: round i64, switch u8, width i32, evict_slots[], insert_slots[],
// insert_ids[], insert_dirty[], insert_values[], serve_offsets[], serve_slots[],
// stats f64[kProducerStats], note.
StagingWriter::StagingWriter(std::vector<char>& out, int64_t round, bool switch_to_ps, int width)
    : out_(out), width_(width) {
  comm::ByteWriter writer(out_);
  writer.align(8);
  writer.put<int64_t>(round);
  writer.put<uint8_t>(switch_to_ps ? 1 : 0);
  writer.put<int32_t>(width);
}

void StagingWriter::evict_slots(const std::vector<int32_t>& slots) { comm::ByteWriter(out_).put_vector(slots); }

void StagingWriter::reserve_inserts(size_t n) {
  comm::ByteWriter writer(out_);
  writer.put_array_uninitialized<int32_t>(n);
  slots_at_ = out_.size() - n * sizeof(int32_t);
  writer.put_array_uninitialized<RowId>(n);
  ids_at_ = out_.size() - n * sizeof(RowId);
  writer.put_array_uninitialized<uint8_t>(n);
  dirty_at_ = out_.size() - n;
  writer.put_array_uninitialized<float>(n * static_cast<size_t>(width_));
  values_at_ = out_.size() - n * static_cast<size_t>(width_) * sizeof(float);
}

void StagingWriter::serve(const std::vector<int32_t>& offsets, const std::vector<int32_t>& slots) {
  comm::ByteWriter writer(out_);
  writer.put_vector(offsets);
  writer.put_vector(slots);
}

void StagingWriter::finish(const double* stats, const std::string& note) {
  comm::ByteWriter writer(out_);
  writer.put_array(stats, kProducerStats);
  writer.put_string(note);
}

StagingView read_staging(const char* data, size_t size) {
  comm::ByteReader reader(data, size, "staging message");
  StagingView v;
  v.round = reader.get<int64_t>();
  v.switch_to_ps = reader.get<uint8_t>() != 0;
  v.width = reader.get<int32_t>();
  v.evict_slots = reader.view_array<int32_t>();
  v.insert_slots = reader.view_array<int32_t>();
  v.insert_ids = reader.view_array<RowId>();
  v.insert_dirty = reader.view_array<uint8_t>();
  v.insert_values = reader.view_array<float>();
  v.serve_offsets = reader.view_array<int32_t>();
  v.serve_slots = reader.view_array<int32_t>();
  const comm::Span<double> stats = reader.view_array<double>();
  if (stats.size != kProducerStats) reader.fail("producer counters of another build");
  v.stats = stats.data;
  v.note = reader.get_string();
  reader.expect_end();
  const size_t n = v.insert_slots.size;
  if (v.width < 0 || v.insert_ids.size != n || v.insert_dirty.size != n ||
      v.insert_values.size != n * static_cast<size_t>(v.width)) {
    reader.fail("staged rows, slots and dirty flags do not match");
  }
  if (!v.serve_offsets.empty()) {
    if (v.serve_offsets[0] != 0 || static_cast<size_t>(v.serve_offsets[v.serve_offsets.size - 1]) != v.serve_slots.size) {
      reader.fail("serve offsets do not cover the serve slots");
    }
    for (size_t r = 1; r < v.serve_offsets.size; ++r) {
      if (v.serve_offsets[r] < v.serve_offsets[r - 1]) reader.fail("serve offsets decrease");
    }
  }
  return v;
}

}  // namespace strata::store
