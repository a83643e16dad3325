// Fuzz target: an event file of behaviour sequences (user item timestamp category),
// then the click and next-item samples cut from what was read.
#include <cstdint>
#include <memory>

#include "common/error.hpp"
#include "data/sequence_events.hpp"
#include "data/sequence_next_item.hpp"
#include "data/sequence_samples.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace strata::data;
  const std::string& path = strata::fuzz::write_input(data, size, ".events");
  SequenceOptions options;
  options.side_columns = {"category"};
  options.max_seq_len = 16;
  options.max_errors_reported = 0;
  try {
    auto corpus = std::make_shared<const SequenceCorpus>(read_sequence_events(options, path));
    const SequenceSamples ctr(corpus, {});
    const NextItemSamples next(corpus, {});
    for (Stream stream : {Stream::kTrain, Stream::kEval}) {
      Batch a, b;
      a.reset(ctr.num_dense(), ctr.num_tables());
      ctr.generate(stream, 0, int32_t(std::min<int64_t>(ctr.size(stream), 64)), a);
      b.reset(next.num_dense(), next.num_tables());
      next.generate(stream, 0, int32_t(std::min<int64_t>(next.size(stream), 64)), b);
    }
  } catch (const strata::Error&) {
  }
  return 0;
}
