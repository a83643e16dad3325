// The producer -> trainer batch message: a batch forwarded in the wire format it
// was shared in (a co-trained producer that never decodes it) is byte for byte
// the message its producer would have encoded from the decoded batch, and it
// decodes back to the same batch.
#include "runtime/batch_channel.hpp"

#include <gtest/gtest.h>

#include "data/batch.hpp"
#include "data/synthetic.hpp"

namespace strata::runtime {
namespace {

data::Batch deduplicated_batch(int32_t samples) {
  DataOptions options;
  options.num_tables = 3;
  options.vocab_sizes = "500";
  options.hotness = "2";
  options.synthetic_history_length = 9;  // a ragged table too
  options.synthetic_history_vocab = 800;
  options.synthetic_train_samples = 1024;
  const data::SyntheticDataset dataset(options);
  data::Batch batch;
  batch.reset(dataset.num_dense(), dataset.num_tables());
  dataset.generate(data::Stream::kTrain, 64, samples, batch);
  data::deduplicate(batch);
  return batch;
}

TEST(BatchChannel, AForwardedWireFormatIsTheEncodedMessage) {
  for (const int32_t samples : {1, 7, 256}) {
    const data::Batch batch = deduplicated_batch(samples);
    std::vector<char> wire;
    data::serialize(batch, wire);
    std::vector<char> forwarded = {'x'};  // a reused buffer's old bytes must not survive
    encode_batch_message_from_wire(wire, forwarded);
    EXPECT_EQ(forwarded, encode_batch_message(batch)) << samples << " samples";
    EXPECT_EQ(message_kind(forwarded), BatchMessageKind::kBatch);
    const data::Batch back = decode_batch_message(forwarded);
    std::vector<char> again;
    data::serialize(back, again);
    EXPECT_EQ(again, wire);
    EXPECT_EQ(batch_message_attachment(forwarded).second, 0u);
  }
}

}  // namespace
}  // namespace strata::runtime
