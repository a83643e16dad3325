// Behaviour sequences in HDF5: `strata convert --from sequences | synthetic_sequences`
// writes a SequenceCorpus (per-user events, oldest first, already hashed) as jagged
// datasets, values + offsets, never padded; data.source = hdf5 reads it back into
// the identical corpus, so the samples cut from it (SequenceSamples, NextItemSamples)
// and everything trained on them equal the event file's bit for bit.
// Layout: data/hdf5_dataset_format.hpp and docs/DATA_HDF5.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "data/hdf5_dataset_writer.hpp"
#include "data/sample_reader.hpp"
#include "data/sequence_events.hpp"

namespace strata::data {

// What a sequence file says about itself, validated against itself.
struct SequenceHdf5Info {
  std::string source;                   // sequences | synthetic_sequences: what it was converted from
  int64_t num_users = 0;                // U
  int64_t num_events = 0;               // E
  std::vector<std::string> side_names;  // (S) side columns, in order
  bool timestamps = false;              // events carry timestamps
  int64_t max_seq_len = 0;              // data.max_seq_len of the conversion (0 = every event kept)
  std::string input;                    // the event file converted ("" for synthetic)
  int64_t input_lines = 0;              // its lines, malformed ones included
  int64_t malformed_lines = 0;          // lines skipped as malformed
};

// What the writer records beside the corpus.
struct SequenceHdf5Header {
  std::string source;           // sequences | synthetic_sequences
  std::string input;            // the event file ("" for synthetic)
  int64_t max_seq_len = 0;      // data.max_seq_len the corpus was cut with
  SequenceOptions hashing;      // its feature_key tables (user_table, item_table, first_side_table)
  int64_t input_lines = 0;
  int64_t malformed_lines = 0;
};

// Writes `corpus` (first_user must be 0: a whole corpus) to a new file at `path`.
// Deterministic: the same corpus and options give a byte-identical file.
void write_sequence_hdf5(const std::string& path, const SequenceCorpus& corpus, const SequenceHdf5Header& header,
                         const Hdf5WriterOptions& options);

// True when `path` is a readable strata HDF5 file whose source is a behaviour
// sequence one; false for anything else (missing, text, click samples, damaged),
// which the caller's reader then reports.
bool is_sequence_hdf5(const std::string& path);

// Opens `path` and checks its layout (attributes, datasets, element types, lengths);
// strata::Error naming the file, the dataset and what is wrong.
SequenceHdf5Info read_sequence_hdf5_info(const std::string& path);

// The whole corpus, validated (offsets from 0 to E, never decreasing). stats: lines =
// samples = events read, malformed = 0 (the conversion dropped them; the file's
// malformed_lines says how many).
SequenceCorpus read_sequence_hdf5(const std::string& path, ParseStats* stats = nullptr);

// data.source = hdf5 with a sequence file in data.train, at deck time: its held-out
// events (the SASRec split) are evaluated as data.source = sequences does, so an
// empty data.eval becomes data.train; another data.eval, a data.sequence_side_columns
// other than the file's, or a model.kind that does not fit data.sequence_task is a
// strata::Error naming the key. With a click-sample file, a next-item model.kind
// (sasrec, hstu) is refused. Does nothing for other sources or a missing file.
void resolve_sequence_hdf5(DataOptions& data, const std::string& model_kind);

// The most recent max_len events of each user (max_len 0 = all), with their
// timestamps and side columns: what the event reader keeps with data.max_seq_len.
SequenceCorpus keep_most_recent(SequenceCorpus corpus, int64_t max_len);

}  // namespace strata::data
