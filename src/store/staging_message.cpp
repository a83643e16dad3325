#include "store/staging_message.hpp"

#include <array>

#include "comm/wire.hpp"

namespace strata::store {

void append_row_block(const RowBlock& block, std::vector<char>& out) {
  comm::ByteWriter writer(out);
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
  if (block.values.size() != block.ids.size() * static_cast<size_t>(block.width)) {
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
                                              "l1_mb", "l2_mb", "prefetch_depth"};
  return names[stat];
}

void append_staging(const StagingMessage& message, std::vector<char>& out) {
  comm::ByteWriter writer(out);
  writer.put<int64_t>(message.round);
  writer.put<uint8_t>(message.switch_to_ps ? 1 : 0);
  writer.put(message.stats);
  writer.put_vector(message.evict);
  writer.put_vector(message.insert_dirty);
  writer.put_string(message.note);
  append_row_block(message.insert, out);
}

StagingMessage read_staging(const char* data, size_t size) {
  comm::ByteReader reader(data, size, "staging message");
  StagingMessage message;
  message.round = reader.get<int64_t>();
  message.switch_to_ps = reader.get<uint8_t>() != 0;
  const auto stats = reader.get<std::array<double, kProducerStats>>();
  std::copy(stats.begin(), stats.end(), message.stats);
  reader.get_vector(message.evict);
  reader.get_vector(message.insert_dirty);
  message.note = reader.get_string();
  const size_t used = size - reader.remaining();
  size_t consumed = 0;
  message.insert = read_row_block(data + used, size - used, &consumed);
  if (used + consumed != size) throw Error("staging message: trailing bytes");
  if (message.insert_dirty.size() != message.insert.size()) throw Error("staging message: dirty flags do not match rows");
  return message;
}

}  // namespace strata::store
