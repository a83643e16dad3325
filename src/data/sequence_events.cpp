// Event files into a SequenceCorpus, and what is derived from one: the SASRec split,
// user shards and batches. The reader keeps one flat record per event while reading
// (users interned in order of first appearance), then groups them with a stable
// counting sort by user, so memory stays ~ a small multiple of the events.
#include "data/sequence_events.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "common/error.hpp"
#include "data/feature_hash.hpp"
#include "data/text_format.hpp"
#include "data/text_reader.hpp"

namespace strata::data {

namespace {

inline bool is_blank(char c) { return c == ' ' || c == '\t'; }

// Fields of a line: runs of blanks separate, and so does one comma with blanks
// around it, so "1,,3" has an empty (missing) second field and "1 2 " two fields.
void split_fields(std::string_view line, std::vector<std::string_view>& fields) {
  fields.clear();
  size_t i = 0;
  const size_t n = line.size();
  while (i < n && is_blank(line[i])) ++i;
  if (i == n) return;
  while (true) {
    const size_t start = i;
    while (i < n && !is_blank(line[i]) && line[i] != ',') ++i;
    fields.push_back(line.substr(start, i - start));
    bool comma = false;
    while (i < n && is_blank(line[i])) ++i;
    if (i < n && line[i] == ',') {
      comma = true;
      ++i;
      while (i < n && is_blank(line[i])) ++i;
    }
    if (i == n) {
      if (comma) fields.push_back(std::string_view());  // "a,b," ends with a missing field
      return;
    }
  }
}

std::string expected_layout(const SequenceOptions& options) {
  std::string layout = "user item";
  if (options.timestamps) layout += " timestamp";
  for (const std::string& name : options.side_columns) layout += " " + name;
  return layout;
}

// The events as read, before grouping.
struct EventLog {
  std::vector<uint64_t> user_keys;  // (U) in order of first appearance
  std::vector<uint32_t> user;       // (E) index into user_keys
  std::vector<uint64_t> items;      // (E)
  std::vector<int64_t> timestamps;  // (E) when options.timestamps
  std::vector<uint64_t> side;       // (E, S)
};

class EventFileReader {
 public:
  EventFileReader(const SequenceOptions& options, const std::string& path)
      : options_(options),
        source_(path, 0, 1, options.header, TextReaderTuning{}),
        num_fields_(2 + (options.timestamps ? 1 : 0) + int(options.side_columns.size())),
        layout_(expected_layout(options)) {}

  EventLog read(ParseStats& stats) {
    EventLog log;
    std::unordered_map<uint64_t, uint32_t> user_index;
    std::vector<std::string_view> fields;
    const size_t num_side = options_.side_columns.size();
    std::vector<uint64_t> side(num_side);
    while (true) {
      std::string_view line;
      const LineSource::Status status = source_.next(line);
      if (status == LineSource::Status::kEnd) break;
      ++stats.lines;
      ++lines_;
      if (status == LineSource::Status::kTooLong) {
        malformed(stats, {0, "line longer than the longest line allowed (binary data?)"});
        continue;
      }
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // CRLF files
      if (std::memchr(line.data(), '\0', line.size()) != nullptr) {
        malformed(stats, {0, "NUL byte in the line (binary data?)"});
        continue;
      }
      split_fields(line, fields);
      LineError error;
      int64_t timestamp = 0;
      if (!parse(fields, timestamp, side, error)) {
        malformed(stats, error);
        continue;
      }
      const uint64_t user_key = feature_key(options_.user_table, fields[0]);
      const auto [it, added] = user_index.try_emplace(user_key, uint32_t(log.user_keys.size()));
      if (added) {
        if (log.user_keys.size() == std::numeric_limits<uint32_t>::max()) {
          throw Error("'" + source_.path() + "' has more than 2^32 - 1 users", "split the file by user");
        }
        log.user_keys.push_back(user_key);
      }
      log.user.push_back(it->second);
      log.items.push_back(feature_key(options_.item_table, fields[1]));
      if (options_.timestamps) log.timestamps.push_back(timestamp);
      log.side.insert(log.side.end(), side.begin(), side.end());
      ++stats.samples;
    }
    if (malformed_ > 0) {
      spdlog::warn("{}: skipped {} malformed of {} lines", source_.path(), malformed_, lines_);
    }
    return log;
  }

 private:
  bool fail(LineError& error, int column, std::string reason) const {
    error.column = column;
    error.reason = std::move(reason) + " (expected '" + layout_ + "')";
    return false;
  }

  bool parse(const std::vector<std::string_view>& fields, int64_t& timestamp, std::vector<uint64_t>& side,
             LineError& error) const {
    const int n = int(fields.size());
    if (n == 0) return fail(error, 0, "empty line");
    if (fields[0].empty()) return fail(error, 1, "user is empty");
    if (n < 2 || fields[1].empty()) return fail(error, 2, "item is missing");
    if (n != num_fields_) {
      return fail(error, 0,
                  fmt::format("{} fields, expected {}: too {}", n, num_fields_, n < num_fields_ ? "few" : "many"));
    }
    int column = 2;
    if (options_.timestamps) {
      const std::string_view text = fields[size_t(column)];
      const auto [stop, ec] = std::from_chars(text.data(), text.data() + text.size(), timestamp);
      if (text.empty() || ec != std::errc() || stop != text.data() + text.size()) {
        return fail(error, column + 1, "timestamp '" + quote_field(text) + "' is not an integer");
      }
      ++column;
    }
    for (size_t c = 0; c < side.size(); ++c, ++column) {
      side[c] = feature_key(options_.first_side_table + uint32_t(c), fields[size_t(column)]);
    }
    return true;
  }

  void malformed(ParseStats& stats, const LineError& error) {
    ++stats.malformed;
    ++malformed_;
    const std::string where = fmt::format("{}:{}", source_.path(), source_.line_number()) +
                              (error.column > 0 ? fmt::format(", column {}", error.column) : std::string());
    if (options_.strict) {
      throw Error("malformed line " + where + ": " + error.reason,
                  "fix or remove the line, or run with --data.strict=false to skip malformed lines");
    }
    if (reported_ < std::max(0, options_.max_errors_reported)) {
      ++reported_;
      spdlog::warn("malformed line {}: {}; skipped", where, error.reason);
    } else if (!announced_more_) {
      announced_more_ = true;
      spdlog::warn("{}: more malformed lines; counting them without logging each (max_errors_reported = {})",
                   source_.path(), options_.max_errors_reported);
    }
  }

  const SequenceOptions& options_;
  LineSource source_;
  int num_fields_;
  std::string layout_;
  int64_t lines_ = 0, malformed_ = 0;
  int reported_ = 0;
  bool announced_more_ = false;
};

}  // namespace

SequenceCorpus read_sequence_events(const SequenceOptions& options, const std::string& path, ParseStats* stats) {
  if (options.max_seq_len < 0) {
    throw Error("max_seq_len = " + std::to_string(options.max_seq_len) + " is negative",
                "use 0 (keep every event) or the number of most recent events to keep");
  }
  ParseStats local;
  ParseStats& counts = stats ? *stats : local;
  EventLog log = EventFileReader(options, path).read(counts);

  const size_t num_users = log.user_keys.size();
  const size_t num_events = log.items.size();
  const size_t num_side = options.side_columns.size();
  // Stable counting sort by user: each user's events stay in file order.
  std::vector<int64_t> start(num_users + 1, 0);
  for (uint32_t u : log.user) ++start[size_t(u) + 1];
  std::partial_sum(start.begin(), start.end(), start.begin());
  std::vector<int64_t> order(num_events);
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (size_t e = 0; e < num_events; ++e) order[size_t(next[log.user[e]]++)] = int64_t(e);
  }
  log.user = {};

  SequenceCorpus corpus;
  corpus.side_names = options.side_columns;
  corpus.user_keys = std::move(log.user_keys);
  corpus.offsets.assign(1, 0);
  corpus.offsets.reserve(num_users + 1);
  const int64_t keep = options.max_seq_len;
  int64_t kept = 0;
  for (size_t u = 0; u < num_users; ++u) {
    const int64_t n = start[u + 1] - start[u];
    kept += keep > 0 ? std::min(n, keep) : n;
  }
  corpus.items.reserve(size_t(kept));
  if (options.timestamps) corpus.timestamps.reserve(size_t(kept));
  corpus.side.reserve(size_t(kept) * num_side);
  for (size_t u = 0; u < num_users; ++u) {
    const auto first = order.begin() + start[u];
    const auto last = order.begin() + start[u + 1];
    if (options.timestamps) {
      std::stable_sort(first, last, [&](int64_t a, int64_t b) {
        return log.timestamps[size_t(a)] < log.timestamps[size_t(b)];
      });
    }
    const auto from = keep > 0 && last - first > keep ? last - keep : first;  // the most recent
    for (auto it = from; it != last; ++it) {
      const size_t e = size_t(*it);
      corpus.items.push_back(log.items[e]);
      if (options.timestamps) corpus.timestamps.push_back(log.timestamps[e]);
      corpus.side.insert(corpus.side.end(), log.side.begin() + int64_t(e * num_side),
                         log.side.begin() + int64_t((e + 1) * num_side));
    }
    corpus.offsets.push_back(int64_t(corpus.items.size()));
  }
  return corpus;
}

SplitSpan split_span(const SequenceCorpus& corpus, int64_t user, SequenceSplit split, int64_t max_history) {
  const int64_t b = corpus.offsets[size_t(user)];
  const int64_t e = corpus.offsets[size_t(user) + 1];
  const bool held_out = e - b >= 3;
  SplitSpan span{b, b, b, b};
  switch (split) {
    case SequenceSplit::kTrain: {
      const int64_t end = held_out ? e - 2 : e;
      span = {b, std::max(b, end - 1), std::min(b + 1, end), end};
      break;
    }
    case SequenceSplit::kValidation:
      if (held_out) span = {b, e - 2, e - 2, e - 1};
      break;
    case SequenceSplit::kTest:
      if (held_out) span = {b, e - 1, e - 1, e};
      break;
  }
  if (max_history > 0 && span.history_end - span.history_begin > max_history) {
    span.history_begin = span.history_end - max_history;
    if (split == SequenceSplit::kTrain) span.target_begin = span.history_begin + 1;
  }
  return span;
}

UserRange shard_users(int64_t num_users, int shard, int num_shards) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards || num_users < 0) {
    throw Error("user shard " + std::to_string(shard) + " of " + std::to_string(num_shards) + " does not exist",
                "shards are numbered 0 .. num_shards - 1");
  }
  __extension__ using i128 = __int128;
  return {int64_t(i128(num_users) * shard / num_shards), int64_t(i128(num_users) * (shard + 1) / num_shards)};
}

SequenceCorpus slice_users(const SequenceCorpus& corpus, UserRange range) {
  if (range.begin < 0 || range.end < range.begin || range.end > corpus.num_users()) {
    throw Error(fmt::format("users [{}, {}) are outside the corpus of {} users", range.begin, range.end,
                            corpus.num_users()),
                "take ranges from shard_users(corpus.num_users(), ...)");
  }
  SequenceCorpus out;
  out.first_user = corpus.first_user + range.begin;
  out.side_names = corpus.side_names;
  out.user_keys.assign(corpus.user_keys.begin() + range.begin, corpus.user_keys.begin() + range.end);
  const int64_t e0 = corpus.offsets[size_t(range.begin)];
  const int64_t e1 = corpus.offsets[size_t(range.end)];
  out.offsets.clear();
  for (int64_t u = range.begin; u <= range.end; ++u) out.offsets.push_back(corpus.offsets[size_t(u)] - e0);
  out.items.assign(corpus.items.begin() + e0, corpus.items.begin() + e1);
  if (!corpus.timestamps.empty()) {
    out.timestamps.assign(corpus.timestamps.begin() + e0, corpus.timestamps.begin() + e1);
  }
  const int64_t s = corpus.num_side();
  out.side.assign(corpus.side.begin() + e0 * s, corpus.side.begin() + e1 * s);
  return out;
}

int sequence_num_tables(const SequenceCorpus& corpus, const SequenceBatchOptions& options) {
  return 2 + (options.side_tables ? corpus.num_side() : 0);
}

void append_sequence_batch(const SequenceCorpus& corpus, SequenceSplit split, int64_t first, int32_t count,
                           const SequenceBatchOptions& options, Batch& batch,
                           std::vector<int64_t>* history_timestamps) {
  if (first < 0 || count < 0 || first > corpus.num_users() - count) {
    throw Error(fmt::format("users [{}, {}) are outside the corpus of {} users", first, first + int64_t(count),
                            corpus.num_users()),
                "clamp the range to SequenceCorpus::num_users()");
  }
  const int num_tables = sequence_num_tables(corpus, options);
  if (batch.num_dense != 0 || batch.tables.size() != size_t(num_tables)) {
    if (batch.size != 0) {
      throw Error(fmt::format("batch has {} dense and {} tables, a sequence batch 0 and {}", batch.num_dense,
                              batch.tables.size(), num_tables),
                  "reset the batch with 0 dense and sequence_num_tables() tables");
    }
    batch.reset(0, num_tables);
  }
  if (count == 0) return;
  if (batch.size == 0) batch.first_sample = corpus.first_user + first;
  const int num_side = options.side_tables ? corpus.num_side() : 0;
  SparseBags& history = batch.tables[kHistoryTable];
  SparseBags& targets = batch.tables[kTargetTable];
  for (int64_t u = first; u < first + count; ++u) {
    const SplitSpan span = split_span(corpus, u, split, options.max_history);
    const auto items = corpus.items.begin();
    history.keys.insert(history.keys.end(), items + span.history_begin, items + span.history_end);
    targets.keys.insert(targets.keys.end(), items + span.target_begin, items + span.target_end);
    for (int c = 0; c < num_side; ++c) {
      std::vector<uint64_t>& keys = batch.tables[size_t(kFirstSideTable + c)].keys;
      for (int64_t e = span.history_begin; e < span.history_end; ++e) {
        keys.push_back(corpus.side[size_t(e * corpus.num_side() + c)]);
      }
    }
    if (history_timestamps && !corpus.timestamps.empty()) {
      history_timestamps->insert(history_timestamps->end(), corpus.timestamps.begin() + span.history_begin,
                                 corpus.timestamps.begin() + span.history_end);
    }
    if (history.keys.size() > size_t(std::numeric_limits<int32_t>::max()) ||
        targets.keys.size() > size_t(std::numeric_limits<int32_t>::max())) {
      throw Error("a sequence batch holds more than 2^31 - 1 keys in one table",
                  "use fewer users per batch or a smaller max_history");
    }
    for (SparseBags& bags : batch.tables) bags.offsets.push_back(int32_t(bags.keys.size()));
    batch.labels.push_back(span.num_targets() > 0 ? 1.0f : 0.0f);
  }
  batch.size += count;
}

}  // namespace strata::data
