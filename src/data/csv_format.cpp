// Generic CSV/TSV parsing: the column spec grammar and the per-line parser.
#include "data/csv_format.hpp"

#include <charconv>
#include <cstring>

#include "common/error.hpp"
#include "data/feature_hash.hpp"

namespace strata::data {

namespace {

Error spec_error(const DataOptions& options, const std::string& problem) {
  return Error("data.csv_columns = '" + options.csv_columns + "': " + problem,
               std::string("give ") + kCsvColumnsGrammar);
}

bool parse_count(std::string_view text, int& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size() && value >= 1;
}

std::string_view trim_spaces(std::string_view text) {
  while (!text.empty() && (text.front() == ' ')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ')) text.remove_suffix(1);
  return text;
}

bool parse_number(std::string_view text, double& value) {
  text = trim_spaces(text);
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

char parse_delimiter(const std::string& text) {
  if (text == "\\t" || text == "\t" || text == "tab") return '\t';
  if (text.size() != 1 || text == "\n" || text == "\r") {
    throw Error("data.csv_delimiter = '" + text + "' is not a single character",
                "use ',' (default), ';', '|', or \"\\t\" / tab for TSV");
  }
  return text[0];
}

bool fail(LineError& error, size_t column, std::string why) {
  error.column = int(column) + 1;
  error.reason = std::move(why);
  return false;
}

}  // namespace

CsvSchema parse_csv_schema(const DataOptions& options) {
  CsvSchema schema;
  schema.delimiter = parse_delimiter(options.csv_delimiter);
  if (options.csv_columns.empty()) throw spec_error(options, "empty");
  int labels = 0, candidates = 0;
  std::string_view rest = options.csv_columns;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view group = trim_spaces(rest.substr(0, comma));
    const size_t colon = group.find(':');
    const std::string_view name = group.substr(0, colon);
    const std::string_view args =
        colon == std::string_view::npos ? std::string_view() : group.substr(colon + 1);
    CsvColumn column;
    int count = 0;
    if (name == "label") {
      if (colon != std::string_view::npos) throw spec_error(options, "'label' takes no count");
      column.kind = CsvColumn::Kind::kLabel;
      count = 1;
      ++labels;
    } else if (name == "dense" || name == "cat" || name == "skip") {
      if (!parse_count(args, count)) {
        throw spec_error(options,
                         "'" + std::string(group) + "' needs a count >= 1, as " + std::string(name) + ":N");
      }
      column.kind = name == "dense" ? CsvColumn::Kind::kDense
                    : name == "cat" ? CsvColumn::Kind::kCategorical
                                    : CsvColumn::Kind::kSkip;
    } else if (name == "seq") {
      if (args.size() != 1) {
        throw spec_error(options, "'" + std::string(group) + "' must be seq:SEP with SEP one character (not ',')");
      }
      if (args[0] == schema.delimiter) {
        throw spec_error(options, "'" + std::string(group) + "': SEP equals data.csv_delimiter");
      }
      column.kind = CsvColumn::Kind::kSequence;
      column.separator = args[0];
      column.sequence = schema.num_sequences++;
      count = 1;
    } else if (name == "cand") {
      if (colon != std::string_view::npos) throw spec_error(options, "'cand' takes no count");
      column.kind = CsvColumn::Kind::kCandidate;
      column.sequence = candidates++;
      count = 1;
    } else if (name == "multi") {
      const size_t second = args.find(':');
      if (second == std::string_view::npos || !parse_count(args.substr(0, second), count)) {
        throw spec_error(options, "'" + std::string(group) + "' must be multi:N:SEP with N >= 1");
      }
      const std::string_view sep = args.substr(second + 1);
      if (sep.size() != 1) {
        throw spec_error(options,
                         "'" + std::string(group) + "': SEP must be one character (',' cannot be used)");
      }
      if (sep[0] == schema.delimiter) {
        throw spec_error(options, "'" + std::string(group) + "': SEP equals data.csv_delimiter");
      }
      column.kind = CsvColumn::Kind::kMultiHot;
      column.separator = sep[0];
    } else {
      throw spec_error(options, group.empty() ? std::string("empty column group")
                                              : "unknown column group '" + std::string(group) + "'");
    }
    for (int i = 0; i < count; ++i) {
      if (column.kind == CsvColumn::Kind::kDense) column.target = schema.num_dense++;
      if (column.kind == CsvColumn::Kind::kCategorical || column.kind == CsvColumn::Kind::kMultiHot ||
          column.kind == CsvColumn::Kind::kSequence) {
        column.target = schema.num_tables++;
      }
      if (column.kind == CsvColumn::Kind::kSequence) schema.sequence_tables.push_back(column.target);
      schema.columns.push_back(column);
    }
    if (schema.columns.size() > (1u << 20)) throw spec_error(options, "more than 2^20 columns");
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (labels == 0) throw spec_error(options, "no 'label' column");
  if (labels > 16) throw spec_error(options, std::to_string(labels) + " 'label' columns: at most 16 tasks");
  schema.num_tasks = labels;
  if (candidates != schema.num_sequences) {
    throw spec_error(options, std::to_string(schema.num_sequences) + " seq columns but " +
                                  std::to_string(candidates) + " cand columns: each seq:SEP needs its cand");
  }
  // A candidate hashes into its sequence's table, so history and candidate share rows.
  for (CsvColumn& column : schema.columns) {
    if (column.kind == CsvColumn::Kind::kCandidate) column.target = schema.sequence_tables[size_t(column.sequence)];
  }
  if (options.max_seq_len < 0) {
    throw Error("data.max_seq_len = " + std::to_string(options.max_seq_len) + " is negative",
                "use 0 (every id of a seq column) or the number of most recent ids to keep");
  }
  schema.max_history = options.max_seq_len;
  return schema;
}

CsvParser::CsvParser(CsvSchema schema) : schema_(std::move(schema)) {
  for (int t = 0; t < schema_.num_tables; ++t)
    empty_key_.push_back(feature_key(uint32_t(t), std::string_view()));
  candidates_.resize(size_t(schema_.num_sequences));
}

namespace {

// Appends the non-empty ids of `field` (separated by `separator`) as keys of `table`.
void append_ids(std::string_view field, char separator, uint32_t table, std::vector<uint64_t>& keys) {
  // Empty items (an empty field, "a||b", a trailing separator) add no key.
  const char* q = field.data();
  const char* const field_end = q + field.size();
  while (q < field_end) {
    const char* sep = static_cast<const char*>(std::memchr(q, separator, size_t(field_end - q)));
    const char* stop = sep ? sep : field_end;
    if (stop > q) keys.push_back(feature_key(table, std::string_view(q, size_t(stop - q))));
    if (sep == nullptr) break;
    q = sep + 1;
  }
}

}  // namespace

bool CsvParser::parse(std::string_view line, Batch& batch, LineError& error) {
  const char* p = line.data();
  const char* const end = p + line.size();
  const char delimiter = schema_.delimiter;
  bool more = true;  // false once the last field of the line is taken
  const size_t dense_at = batch.dense.size();
  batch.dense.resize(dense_at + size_t(schema_.num_dense), 0.0f);
  float* dense = batch.dense.data() + dense_at;
  for (size_t c = 0; c < schema_.columns.size(); ++c) {
    // A CSV line has every declared column: fields stripped from its end are not
    // empty ones (only Criteo documents that), so a short line is malformed.
    if (!more) return missing_columns(error, c);
    const char* stop = static_cast<const char*>(std::memchr(p, delimiter, size_t(end - p)));
    const std::string_view field(p, size_t((stop ? stop : end) - p));
    if (stop)
      p = stop + 1;
    else
      more = false;
    const CsvColumn& column = schema_.columns[c];
    switch (column.kind) {
      case CsvColumn::Kind::kLabel: {
        double value = 0.0;
        if (!parse_number(field, value) || (value != 0.0 && value != 1.0)) {
          return fail(error, c, "label '" + quote_field(field) + "' is not 0 or 1");
        }
        batch.labels.push_back(float(value));
        break;
      }
      case CsvColumn::Kind::kDense: {
        if (trim_spaces(field).empty()) break;  // missing: 0
        double value = 0.0;
        if (!parse_number(field, value)) {
          return fail(error, c, "dense value '" + quote_field(field) + "' is not a finite number");
        }
        dense[column.target] = dense_transform(value);
        break;
      }
      case CsvColumn::Kind::kCategorical:
        batch.tables[size_t(column.target)].keys.push_back(
            field.empty() ? empty_key_[size_t(column.target)] : feature_key(uint32_t(column.target), field));
        break;
      case CsvColumn::Kind::kMultiHot:
        append_ids(field, column.separator, uint32_t(column.target), batch.tables[size_t(column.target)].keys);
        break;
      case CsvColumn::Kind::kSequence: {
        std::vector<uint64_t>& keys = batch.tables[size_t(column.target)].keys;
        const size_t first = keys.size();
        append_ids(field, column.separator, uint32_t(column.target), keys);
        const int64_t cap = schema_.max_history;
        if (cap > 0 && int64_t(keys.size() - first) > cap) {  // keep the most recent ids
          keys.erase(keys.begin() + int64_t(first), keys.end() - cap);
        }
        break;
      }
      case CsvColumn::Kind::kCandidate:
        candidates_[size_t(column.sequence)] =
            field.empty() ? empty_key_[size_t(column.target)] : feature_key(uint32_t(column.target), field);
        break;
      case CsvColumn::Kind::kSkip:
        break;
    }
  }
  // Target-last bags: the candidate after its history, wherever its column was.
  for (int q = 0; q < schema_.num_sequences; ++q) {
    batch.tables[size_t(schema_.sequence_tables[size_t(q)])].keys.push_back(candidates_[size_t(q)]);
  }
  if (more) {
    size_t fields = schema_.columns.size() + 1;
    for (const char* q = p; (q = static_cast<const char*>(std::memchr(q, delimiter, size_t(end - q)))); ++q)
      ++fields;
    return fail(
        error, schema_.columns.size(),
        std::to_string(fields) + " fields, expected " + std::to_string(schema_.columns.size()) +
            " (data.csv_columns)");
  }
  return true;
}

// The line ended after `present` fields: names the missing columns by their
// groups in data.csv_columns, e.g. "columns 3-6 (dense:1, multi:1, skip:1, cat:1)".
bool CsvParser::missing_columns(LineError& error, size_t present) const {
  auto group = [](CsvColumn::Kind kind) {
    switch (kind) {
      case CsvColumn::Kind::kLabel: return "label";
      case CsvColumn::Kind::kDense: return "dense";
      case CsvColumn::Kind::kCategorical: return "cat";
      case CsvColumn::Kind::kMultiHot: return "multi";
      case CsvColumn::Kind::kSkip: return "skip";
      case CsvColumn::Kind::kSequence: return "seq";
      case CsvColumn::Kind::kCandidate: return "cand";
    }
    return "?";
  };
  const size_t total = schema_.columns.size();
  std::string groups;
  for (size_t c = present; c < total;) {
    size_t n = 1;
    while (c + n < total && schema_.columns[c + n].kind == schema_.columns[c].kind) ++n;
    const CsvColumn::Kind kind = schema_.columns[c].kind;
    groups += (groups.empty() ? "" : ", ") + std::string(group(kind)) +
              (kind == CsvColumn::Kind::kLabel ? std::string() : ":" + std::to_string(n));
    c += n;
  }
  const std::string columns = present + 1 == total ? "column " + std::to_string(total)
                                                   : "columns " + std::to_string(present + 1) + "-" +
                                                         std::to_string(total);
  return fail(error, present,
              std::to_string(present) + (present == 1 ? " field" : " fields") + ", expected " +
                  std::to_string(total) + " (data.csv_columns): " + columns + " (" + groups + ") missing");
}

}  // namespace strata::data
