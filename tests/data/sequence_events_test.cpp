// Event files into a SequenceCorpus: separators, timestamp order and its ties, file
// order, tokens, side columns, malformed lines in skip and strict mode, max_seq_len;
// then the SASRec split, user shards and sequence batches.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/feature_hash.hpp"
#include "data/sequence_events.hpp"
#include "data_test_util.hpp"

namespace strata::data {
namespace {

using testing::LogCapture;
using testing::ScratchDir;

SequenceCorpus read_text(const std::string& text, const SequenceOptions& options = {},
                         ParseStats* stats = nullptr) {
  ScratchDir dir;
  return read_sequence_events(options, dir.file("events.txt", text), stats);
}

uint64_t item(const std::string& token) { return feature_key(SequenceOptions{}.item_table, token); }
uint64_t user(const std::string& token) { return feature_key(SequenceOptions{}.user_table, token); }

std::vector<uint64_t> items_of(const SequenceCorpus& corpus, int64_t u) {
  return {corpus.items.begin() + corpus.offsets[size_t(u)], corpus.items.begin() + corpus.offsets[size_t(u) + 1]};
}

std::vector<uint64_t> items(const std::vector<std::string>& tokens) {
  std::vector<uint64_t> keys;
  for (const std::string& t : tokens) keys.push_back(item(t));
  return keys;
}

TEST(SequenceEvents, EverySeparatorGivesTheSameCorpus) {
  const std::vector<std::string> files = {
      "1 1193 978300760\n1 661 978302109\n2 1357 978298709\n",        // ml-1m as SASRec ships it
      "1\t1193\t978300760\n1\t661\t978302109\n2\t1357\t978298709\n",  // TSV
      "1,1193,978300760\n1,661,978302109\n2,1357,978298709\n",        // CSV
      "  1   1193\t 978300760  \r\n1 , 661,978302109\r\n2\t1357 ,  978298709",  // mixed, CRLF, no final newline
  };
  for (const std::string& text : files) {
    ParseStats stats;
    const SequenceCorpus corpus = read_text(text, {}, &stats);
    EXPECT_EQ(stats.malformed, 0) << text;
    EXPECT_EQ(stats.samples, 3);
    ASSERT_EQ(corpus.num_users(), 2) << text;
    EXPECT_EQ(corpus.user_keys, (std::vector<uint64_t>{user("1"), user("2")}));
    EXPECT_EQ(corpus.offsets, (std::vector<int64_t>{0, 2, 3}));
    EXPECT_EQ(corpus.items, items({"1193", "661", "1357"}));
    EXPECT_EQ(corpus.timestamps, (std::vector<int64_t>{978300760, 978302109, 978298709}));
    EXPECT_TRUE(corpus.side.empty());
  }
}

TEST(SequenceEvents, OrdersByTimestampKeepingFileOrderOnTies) {
  const SequenceCorpus corpus = read_text(
      "7 a 5\n"
      "8 x 2\n"
      "7 b 3\n"
      "7 c 5\n"
      "8 y 1\n"
      "7 d 1\n"
      "7 e 5\n"
      "7 f -4\n");
  ASSERT_EQ(corpus.num_users(), 2);
  EXPECT_EQ(corpus.user_keys[0], user("7"));  // order of first appearance
  EXPECT_EQ(items_of(corpus, 0), items({"f", "d", "b", "a", "c", "e"}));
  EXPECT_EQ(items_of(corpus, 1), items({"y", "x"}));
  EXPECT_EQ(corpus.timestamps, (std::vector<int64_t>{-4, 1, 3, 5, 5, 5, 1, 2}));
}

TEST(SequenceEvents, WithoutTimestampsKeepsFileOrder) {
  SequenceOptions options;
  options.timestamps = false;
  const SequenceCorpus corpus = read_text("u2 i9\nu1 i3\nu2 i1\nu1 i7\nu3 i3\nu2 i5\n", options);
  ASSERT_EQ(corpus.num_users(), 3);
  EXPECT_EQ(corpus.user_keys, (std::vector<uint64_t>{user("u2"), user("u1"), user("u3")}));
  EXPECT_EQ(items_of(corpus, 0), items({"i9", "i1", "i5"}));
  EXPECT_EQ(items_of(corpus, 1), items({"i3", "i7"}));
  EXPECT_EQ(items_of(corpus, 2), items({"i3"}));
  EXPECT_TRUE(corpus.timestamps.empty());
}

TEST(SequenceEvents, TokensHashIntoTheConfiguredTables) {
  SequenceOptions options;
  options.item_table = 5;
  options.user_table = 9;
  const SequenceCorpus corpus = read_text("alice sku-9 10\nbob sku-9 11\n", options);
  EXPECT_EQ(corpus.user_keys, (std::vector<uint64_t>{feature_key(9, "alice"), feature_key(9, "bob")}));
  EXPECT_EQ(corpus.items, (std::vector<uint64_t>{feature_key(5, "sku-9"), feature_key(5, "sku-9")}));
}

TEST(SequenceEvents, SideColumnsFollowTheirEvents) {
  SequenceOptions options;
  options.side_columns = {"category", "action"};
  const SequenceCorpus blanks = read_text("1 10 20 books click\n1 11 10 toys buy\n", options);
  EXPECT_EQ(blanks.side, (std::vector<uint64_t>{feature_key(options.first_side_table, "toys"),
                                                feature_key(options.first_side_table + 1, "buy"),
                                                feature_key(options.first_side_table, "books"),
                                                feature_key(options.first_side_table + 1, "click")}));
  // Empty side values between commas are values (the key of the empty text), as in csv.
  const SequenceCorpus csv = read_text("1,10,20,books,click\n1,11,10,toys,buy\n1,12,30,,\n", options);
  ASSERT_EQ(csv.num_users(), 1);
  EXPECT_EQ(csv.num_side(), 2);
  EXPECT_EQ(csv.side_names, options.side_columns);
  EXPECT_EQ(items_of(csv, 0), items({"11", "10", "12"}));
  const uint32_t category = options.first_side_table, action = options.first_side_table + 1;
  EXPECT_EQ(csv.side, (std::vector<uint64_t>{feature_key(category, "toys"), feature_key(action, "buy"),
                                             feature_key(category, "books"), feature_key(action, "click"),
                                             feature_key(category, ""), feature_key(action, "")}));
}

TEST(SequenceEvents, HeaderLineIsSkipped) {
  SequenceOptions options;
  options.header = true;
  ParseStats stats;
  const SequenceCorpus corpus = read_text("user_id,item_id,timestamp\n1,5,100\n", options, &stats);
  EXPECT_EQ(stats.malformed, 0);
  EXPECT_EQ(corpus.items, items({"5"}));
}

struct BadLine {
  std::string text;
  std::string reason_part;
  int column;  // 0: the line as a whole
};

// Malformed under the layout `user item timestamp category`.
std::vector<BadLine> bad_lines() {
  return {
      {"1", "item is missing", 2},
      {"1,,5,c", "item is missing", 2},
      {",4,5,c", "user is empty", 1},
      {"1 4 12x c", "timestamp '12x' is not an integer", 3},
      {"1 4 1.5 c", "timestamp '1.5' is not an integer", 3},
      {"1 4 99999999999999999999 c", "is not an integer", 3},
      {"1 4 5", "3 fields, expected 4: too few", 0},
      {"1 4 5 c extra", "5 fields, expected 4: too many", 0},
      {"", "empty line", 0},
      {" \t ", "empty line", 0},
      {std::string("1 4\0 5 c", 8), "NUL byte", 0},
  };
}

TEST(SequenceEvents, MalformedLinesAreCountedLoggedWithTheirLineAndSkipped) {
  ScratchDir dir;
  SequenceOptions options;
  options.side_columns = {"category"};
  options.max_errors_reported = 100;
  std::string text;
  std::vector<int> bad_line_numbers;
  int line = 0;
  for (const BadLine& bad : bad_lines()) {
    text += "1 " + std::to_string(line) + " " + std::to_string(line) + " c\n";
    ++line;
    text += bad.text + "\n";
    bad_line_numbers.push_back(++line);
  }
  const std::string path = dir.file("bad.txt", text);
  LogCapture capture;
  ParseStats stats;
  const SequenceCorpus corpus = read_sequence_events(options, path, &stats);
  EXPECT_EQ(stats.lines, line);
  EXPECT_EQ(stats.malformed, int64_t(bad_lines().size()));
  EXPECT_EQ(stats.samples, int64_t(bad_lines().size()));
  EXPECT_EQ(corpus.num_events(), int64_t(bad_lines().size()));
  const std::vector<std::string> logged = capture.lines();
  for (size_t i = 0; i < bad_line_numbers.size(); ++i) {
    const std::string where = path + ":" + std::to_string(bad_line_numbers[i]);
    bool found = false;
    for (const std::string& entry : logged) {
      if (entry.find(where + (bad_lines()[i].column > 0 ? "," : ":")) != std::string::npos &&
          entry.find(bad_lines()[i].reason_part) != std::string::npos) {
        found = true;
      }
    }
    EXPECT_TRUE(found) << "no log of " << where << " (" << bad_lines()[i].reason_part << ")";
  }
  bool summary = false;
  for (const std::string& entry : logged) {
    summary |= entry.find("skipped " + std::to_string(bad_lines().size()) + " malformed of " +
                          std::to_string(line) + " lines") != std::string::npos;
  }
  EXPECT_TRUE(summary);
}

TEST(SequenceEvents, StrictModeNamesFileLineAndFix) {
  ScratchDir dir;
  SequenceOptions options;
  options.side_columns = {"category"};
  options.strict = true;
  for (const BadLine& bad : bad_lines()) {
    const std::string path = dir.file("strict.txt", "1 2 3 c\n1 3 4 c\n" + bad.text + "\n1 4 5 c\n");
    try {
      read_sequence_events(options, path);
      ADD_FAILURE() << "no error for " << bad.reason_part;
    } catch (const Error& e) {
      const std::string what = e.what_failed();
      EXPECT_NE(what.find(path + ":3"), std::string::npos) << what;
      if (bad.column > 0) {
        EXPECT_NE(what.find("column " + std::to_string(bad.column)), std::string::npos) << what;
      }
      EXPECT_NE(what.find(bad.reason_part), std::string::npos) << what;
      if (bad.reason_part != "NUL byte") {  // a field problem shows the declared layout
        EXPECT_NE(what.find("user item timestamp category"), std::string::npos) << what;
      }
      EXPECT_NE(e.how_to_fix().find("fix or remove the line"), std::string::npos);
      EXPECT_NE(e.how_to_fix().find("strict=false"), std::string::npos);
    }
  }
}

TEST(SequenceEvents, FileErrorsNameThePath) {
  ScratchDir dir;
  const std::string missing = dir.path() + "/nope.txt";
  try {
    read_sequence_events({}, missing);
    ADD_FAILURE() << "no error for a missing file";
  } catch (const Error& e) {
    EXPECT_NE(e.what_failed().find(missing), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_sequence_events({}, dir.file("empty.txt", "")), Error);
}

TEST(SequenceEvents, MaxSeqLenKeepsTheMostRecentEvents) {
  SequenceOptions options;
  options.max_seq_len = 3;
  // In file order the newest come first: the cut must follow time, not the file.
  const SequenceCorpus corpus = read_text("1 e 50\n1 d 40\n1 c 30\n1 b 20\n1 a 10\n2 z 1\n", options);
  ASSERT_EQ(corpus.num_users(), 2);
  EXPECT_EQ(items_of(corpus, 0), items({"c", "d", "e"}));
  EXPECT_EQ(items_of(corpus, 1), items({"z"}));
  EXPECT_EQ(corpus.timestamps, (std::vector<int64_t>{30, 40, 50, 1}));

  options.timestamps = false;
  const SequenceCorpus by_file = read_text("1 a\n1 b\n1 c\n1 d\n", options);
  EXPECT_EQ(items_of(by_file, 0), items({"b", "c", "d"}));
  options.max_seq_len = -1;
  EXPECT_THROW(read_text("1 a\n", options), Error);
}

// Users with 1, 2, 3 and 5 events: a1 | b1 b2 | c1 c2 c3 | d1 .. d5.
SequenceCorpus split_corpus() {
  return read_text("a a1 1\nb b1 1\nb b2 2\nc c1 1\nc c2 2\nc c3 3\nd d1 1\nd d2 2\nd d3 3\nd d4 4\nd d5 5\n");
}

std::vector<uint64_t> keys_of(const SequenceCorpus& corpus, int64_t begin, int64_t end) {
  return {corpus.items.begin() + begin, corpus.items.begin() + end};
}

TEST(SequenceSplit, LastIsTestBeforeItValidationRestTrain) {
  const SequenceCorpus corpus = split_corpus();
  ASSERT_EQ(corpus.num_users(), 4);
  struct Expected {
    std::vector<std::string> train_history, train_targets, valid_history, valid_target, test_history, test_target;
  };
  const std::vector<Expected> expected = {
      {{}, {}, {}, {}, {}, {}},                  // 1 event: train only, no next item to learn
      {{"b1"}, {"b2"}, {}, {}, {}, {}},          // 2 events: train only
      {{}, {}, {"c1"}, {"c2"}, {"c1", "c2"}, {"c3"}},  // 3: one train event, no train pair
      {{"d1", "d2"}, {"d2", "d3"}, {"d1", "d2", "d3"}, {"d4"}, {"d1", "d2", "d3", "d4"}, {"d5"}},
  };
  for (int64_t u = 0; u < 4; ++u) {
    const Expected& e = expected[size_t(u)];
    const SplitSpan train = split_span(corpus, u, SequenceSplit::kTrain);
    const SplitSpan valid = split_span(corpus, u, SequenceSplit::kValidation);
    const SplitSpan test = split_span(corpus, u, SequenceSplit::kTest);
    EXPECT_EQ(keys_of(corpus, train.history_begin, train.history_end), items(e.train_history)) << u;
    EXPECT_EQ(keys_of(corpus, train.target_begin, train.target_end), items(e.train_targets)) << u;
    EXPECT_EQ(keys_of(corpus, valid.history_begin, valid.history_end), items(e.valid_history)) << u;
    EXPECT_EQ(keys_of(corpus, valid.target_begin, valid.target_end), items(e.valid_target)) << u;
    EXPECT_EQ(keys_of(corpus, test.history_begin, test.history_end), items(e.test_history)) << u;
    EXPECT_EQ(keys_of(corpus, test.target_begin, test.target_end), items(e.test_target)) << u;
  }
  // A user of 3 trains on c1 alone: its history is the event, nothing to predict.
  const SplitSpan c = split_span(corpus, 2, SequenceSplit::kTrain);
  EXPECT_EQ(c.num_targets(), 0);
  // max_history keeps the most recent history and its targets.
  const SplitSpan cut = split_span(corpus, 3, SequenceSplit::kTest, 2);
  EXPECT_EQ(keys_of(corpus, cut.history_begin, cut.history_end), items({"d3", "d4"}));
  const SplitSpan cut_train = split_span(corpus, 3, SequenceSplit::kTrain, 1);
  EXPECT_EQ(keys_of(corpus, cut_train.history_begin, cut_train.history_end), items({"d2"}));
  EXPECT_EQ(keys_of(corpus, cut_train.target_begin, cut_train.target_end), items({"d3"}));
}

TEST(SequenceShards, CoverEveryUserOnceInContiguousRanges) {
  for (int64_t users : {0, 1, 5, 7, 100, 1001}) {
    for (int shards : {1, 2, 3, 4, 8}) {
      int64_t next = 0;
      for (int s = 0; s < shards; ++s) {
        const UserRange range = shard_users(users, s, shards);
        EXPECT_EQ(range.begin, next) << users << " users, shard " << s << " of " << shards;
        EXPECT_GE(range.size(), users / shards);
        EXPECT_LE(range.size(), users / shards + 1);
        next = range.end;
      }
      EXPECT_EQ(next, users);
    }
  }
  EXPECT_THROW(shard_users(10, 2, 2), Error);
  EXPECT_THROW(shard_users(10, 0, 0), Error);

  // Slices of a corpus put back together are the corpus.
  SequenceOptions options;
  options.side_columns = {"kind"};
  const SequenceCorpus corpus = read_text("1 a 1 x\n2 b 2 y\n2 c 3 z\n3 d 4 w\n4 e 5 v\n4 f 6 u\n", options);
  SequenceCorpus joined;
  for (int s = 0; s < 3; ++s) {
    const SequenceCorpus part = slice_users(corpus, shard_users(corpus.num_users(), s, 3));
    EXPECT_EQ(part.first_user, shard_users(corpus.num_users(), s, 3).begin);
    EXPECT_EQ(part.offsets.front(), 0);
    EXPECT_EQ(part.side_names, corpus.side_names);
    joined.user_keys.insert(joined.user_keys.end(), part.user_keys.begin(), part.user_keys.end());
    for (size_t u = 1; u < part.offsets.size(); ++u) joined.offsets.push_back(joined.offsets.back() + part.length(int64_t(u) - 1));
    joined.items.insert(joined.items.end(), part.items.begin(), part.items.end());
    joined.timestamps.insert(joined.timestamps.end(), part.timestamps.begin(), part.timestamps.end());
    joined.side.insert(joined.side.end(), part.side.begin(), part.side.end());
  }
  EXPECT_EQ(joined.user_keys, corpus.user_keys);
  EXPECT_EQ(joined.offsets, corpus.offsets);
  EXPECT_EQ(joined.items, corpus.items);
  EXPECT_EQ(joined.timestamps, corpus.timestamps);
  EXPECT_EQ(joined.side, corpus.side);
  EXPECT_THROW(slice_users(corpus, {2, 9}), Error);
}

std::vector<uint64_t> bag(const SparseBags& bags, int32_t b) {
  return {bags.keys.begin() + bags.offsets[size_t(b)], bags.keys.begin() + bags.offsets[size_t(b) + 1]};
}

TEST(SequenceBatch, TrainBatchPairsEveryPositionWithTheNextItem) {
  SequenceOptions options;
  options.side_columns = {"kind"};
  const SequenceCorpus corpus =
      read_text("a a1 1 k\nb b1 1 k\nb b2 2 l\nd d1 1 m\nd d2 2 n\nd d3 3 o\nd d4 4 p\nd d5 5 q\n", options);
  Batch batch;
  std::vector<int64_t> times;
  append_sequence_batch(corpus, SequenceSplit::kTrain, 0, 3, {}, batch, &times);
  ASSERT_EQ(batch.size, 3);
  EXPECT_EQ(batch.num_dense, 0);
  EXPECT_EQ(batch.first_sample, 0);
  ASSERT_EQ(batch.tables.size(), 3u);
  EXPECT_EQ(sequence_num_tables(corpus, {}), 3);
  EXPECT_EQ(batch.labels, (std::vector<float>{0.0f, 1.0f, 1.0f}));
  const SparseBags& history = batch.tables[kHistoryTable];
  const SparseBags& targets = batch.tables[kTargetTable];
  const SparseBags& kind = batch.tables[kFirstSideTable];
  EXPECT_EQ(history.offsets, (std::vector<int32_t>{0, 0, 1, 3}));
  EXPECT_EQ(targets.offsets, history.offsets);  // one positive per history position
  EXPECT_EQ(kind.offsets, history.offsets);
  EXPECT_EQ(bag(history, 2), items({"d1", "d2"}));  // train is d1 d2 d3; d4, d5 are held out
  EXPECT_EQ(bag(targets, 2), items({"d2", "d3"}));
  EXPECT_EQ(bag(kind, 1), (std::vector<uint64_t>{feature_key(options.first_side_table, "k")}));
  EXPECT_EQ(times, (std::vector<int64_t>{1, 1, 2}));

  // Appending continues the bags; the first sample stays.
  append_sequence_batch(corpus, SequenceSplit::kTest, 2, 1, {}, batch);
  EXPECT_EQ(batch.size, 4);
  EXPECT_EQ(batch.first_sample, 0);
  EXPECT_EQ(bag(batch.tables[kHistoryTable], 3), items({"d1", "d2", "d3", "d4"}));
  EXPECT_EQ(bag(batch.tables[kTargetTable], 3), items({"d5"}));

  // A batch of another shape is refused unless empty.
  Batch other;
  other.reset(13, 26);
  other.size = 1;
  EXPECT_THROW(append_sequence_batch(corpus, SequenceSplit::kTrain, 0, 1, {}, other), Error);
  EXPECT_THROW(append_sequence_batch(corpus, SequenceSplit::kTrain, 2, 2, {}, batch), Error);
  deduplicate(batch);  // the ordinary path to the wire works on it
  EXPECT_EQ(batch.tables[kHistoryTable].index.size(), 7u);
}

TEST(SequenceBatch, EvalBatchHasOneTargetPerUserAndKeepsTheContextLength) {
  const SequenceCorpus corpus = split_corpus();
  SequenceBatchOptions options;
  options.max_history = 2;
  options.side_tables = false;
  Batch batch;
  append_sequence_batch(slice_users(corpus, {1, 4}), SequenceSplit::kValidation, 0, 3, options, batch);
  EXPECT_EQ(batch.first_sample, 1);
  EXPECT_EQ(batch.labels, (std::vector<float>{0.0f, 1.0f, 1.0f}));
  EXPECT_EQ(batch.tables[kTargetTable].offsets, (std::vector<int32_t>{0, 0, 1, 2}));
  EXPECT_EQ(batch.tables[kTargetTable].keys, items({"c2", "d4"}));
  EXPECT_EQ(batch.tables[kHistoryTable].offsets, (std::vector<int32_t>{0, 0, 1, 3}));
  EXPECT_EQ(batch.tables[kHistoryTable].keys, items({"c1", "d2", "d3"}));
}

}  // namespace
}  // namespace strata::data
