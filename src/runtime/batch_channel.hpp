// The producer <-> trainer protocol. A phase (one training epoch, or one
// evaluation pass) is a stream of batch messages ended by an end-of-phase
// marker; each trainer answers every phase with one PhaseDone message, whose
// `final` flag tells the producer that training is over.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "data/batch.hpp"

namespace strata::runtime {

enum class BatchMessageKind : uint32_t { kBatch = 1, kEndOfPhase = 2 };

struct PhaseDone {
  uint32_t final = 0;  // 1: no more training phases follow
  uint32_t stop = 0;   // 1: preempted: no evaluation, the job ends now
};

// [kind u32][pad u32][batch size u64][batch bytes, padded to 8][attachment bytes];
// the attachment carries the tiered store's staging plan for the same round
// (empty in ps mode). encode_batch_message(batch, message) fills `message` with
// header and batch; an attachment is appended to it afterwards (comm::ByteWriter).
void encode_batch_message(const data::Batch& batch, std::vector<char>& message);
std::vector<char> encode_batch_message(const data::Batch& batch);
// The same message from a batch's wire format (data::serialize's bytes), without
// decoding it: a co-trained producer forwards a shared batch as it found it.
void encode_batch_message_from_wire(const std::vector<char>& wire, std::vector<char>& message);
std::vector<char> encode_end_of_phase();
BatchMessageKind message_kind(const std::vector<char>& message);
data::Batch decode_batch_message(const std::vector<char>& message);
void decode_batch_message(const std::vector<char>& message, data::Batch& batch);  // reuses batch's capacity
// The attachment of a batch message: pointer into `message` and its size.
std::pair<const char*, size_t> batch_message_attachment(const std::vector<char>& message);

}  // namespace strata::runtime
