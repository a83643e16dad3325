#include "runtime/batch_channel.hpp"

#include <cstring>

#include "common/error.hpp"

namespace strata::runtime {

namespace {
constexpr size_t kHeader = sizeof(uint32_t) + sizeof(uint64_t);

uint64_t batch_bytes(const std::vector<char>& message) {
  uint64_t size = 0;
  if (message.size() < kHeader) throw Error("batch message shorter than its header");
  std::memcpy(&size, message.data() + sizeof(uint32_t), sizeof(size));
  if (size > message.size() - kHeader) throw Error("batch message: batch longer than the message");
  return size;
}
}  // namespace

std::vector<char> encode_batch_message(const data::Batch& batch, const std::vector<char>& attachment) {
  std::vector<char> body = data::serialize(batch);
  std::vector<char> message(kHeader + body.size() + attachment.size());
  const uint32_t kind = static_cast<uint32_t>(BatchMessageKind::kBatch);
  const uint64_t size = body.size();
  std::memcpy(message.data(), &kind, sizeof(kind));
  std::memcpy(message.data() + sizeof(kind), &size, sizeof(size));
  std::memcpy(message.data() + kHeader, body.data(), body.size());
  if (!attachment.empty()) std::memcpy(message.data() + kHeader + body.size(), attachment.data(), attachment.size());
  return message;
}

std::pair<const char*, size_t> batch_message_attachment(const std::vector<char>& message) {
  const uint64_t size = batch_bytes(message);
  return {message.data() + kHeader + size, message.size() - kHeader - size};
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

data::Batch decode_batch_message(const std::vector<char>& message) {
  return data::deserialize(message.data() + kHeader, batch_bytes(message));
}

}  // namespace strata::runtime
