#include "runtime/batch_channel.hpp"

#include <cstring>

#include "comm/wire.hpp"
#include "common/error.hpp"

namespace strata::runtime {

namespace {
// kind (u32), padding (u32), batch bytes (u64): the batch starts 8-aligned, and
// so does the attachment after it (the batch is padded).
constexpr size_t kHeader = 2 * sizeof(uint32_t) + sizeof(uint64_t);

uint64_t batch_bytes(const std::vector<char>& message) {
  uint64_t size = 0;
  if (message.size() < kHeader) throw Error("batch message shorter than its header");
  std::memcpy(&size, message.data() + 2 * sizeof(uint32_t), sizeof(size));
  if (size > message.size() - kHeader) throw Error("batch message: batch longer than the message");
  return size;
}
}  // namespace

void encode_batch_message(const data::Batch& batch, std::vector<char>& message) {
  message.clear();
  message.resize(kHeader, 0);
  const uint32_t kind = static_cast<uint32_t>(BatchMessageKind::kBatch);
  std::memcpy(message.data(), &kind, sizeof(kind));
  data::serialize(batch, message);
  const uint64_t size = message.size() - kHeader;
  std::memcpy(message.data() + 2 * sizeof(uint32_t), &size, sizeof(size));
  comm::ByteWriter(message).align(8);
}

void encode_batch_message_from_wire(const std::vector<char>& wire, std::vector<char>& message) {
  message.clear();
  message.resize(kHeader, 0);
  const uint32_t kind = static_cast<uint32_t>(BatchMessageKind::kBatch);
  std::memcpy(message.data(), &kind, sizeof(kind));
  message.insert(message.end(), wire.begin(), wire.end());
  const uint64_t size = wire.size();
  std::memcpy(message.data() + 2 * sizeof(uint32_t), &size, sizeof(size));
  comm::ByteWriter(message).align(8);
}

std::vector<char> encode_batch_message(const data::Batch& batch) {
  std::vector<char> message;
  encode_batch_message(batch, message);
  return message;
}

std::pair<const char*, size_t> batch_message_attachment(const std::vector<char>& message) {
  const uint64_t padded = (batch_bytes(message) + 7) & ~uint64_t(7);
  if (padded > message.size() - kHeader) return {message.data() + message.size(), 0};
  return {message.data() + kHeader + padded, message.size() - kHeader - padded};
}

std::vector<char> encode_end_of_phase() {
  std::vector<char> message(sizeof(uint32_t));
  const uint32_t kind = static_cast<uint32_t>(BatchMessageKind::kEndOfPhase);
  std::memcpy(message.data(), &kind, sizeof(kind));
  return message;
}

BatchMessageKind message_kind(const std::vector<char>& message) {
  uint32_t kind = 0;
  if (message.size() < sizeof(kind)) throw Error("batch message shorter than its header");
  std::memcpy(&kind, message.data(), sizeof(kind));
  if (kind != 1 && kind != 2) throw Error("batch message of unknown kind " + std::to_string(kind));
  return static_cast<BatchMessageKind>(kind);
}

void decode_batch_message(const std::vector<char>& message, data::Batch& batch) {
  data::deserialize(message.data() + kHeader, batch_bytes(message), batch);
}

data::Batch decode_batch_message(const std::vector<char>& message) {
  data::Batch batch;
  decode_batch_message(message, batch);
  return batch;
}

}  // namespace strata::runtime
