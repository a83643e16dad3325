// Criteo TSV parsing: from_chars for the integers, a hex check for the categoricals
// (1-16 hex digits; Criteo's are 8), feature_key of the field text as it appears.
#include "data/criteo_format.hpp"

#include <charconv>
#include <cstring>

#include "data/feature_hash.hpp"

namespace strata::data {

namespace {

struct HexDigits {
  bool is_digit[256] = {};
  constexpr HexDigits() {
    for (int c = '0'; c <= '9'; ++c) is_digit[c] = true;
    for (int c = 'a'; c <= 'f'; ++c) is_digit[c] = true;
    for (int c = 'A'; c <= 'F'; ++c) is_digit[c] = true;
  }
};
constexpr HexDigits kHex;

bool is_hex(std::string_view text) {
  if (text.empty() || text.size() > 16) return false;
  // A table lookup and no early exit: branch-free over the usual 8 digits.
  bool all = true;
  for (char c : text) all &= kHex.is_digit[static_cast<unsigned char>(c)];
  return all;
}

// Column names as in the Criteo documentation: label, I1..I13, C1..C26.
std::string column_name(int field) {
  if (field == 0) return "label";
  if (field <= CriteoParser::kNumDense) return "I" + std::to_string(field);
  return "C" + std::to_string(field - CriteoParser::kNumDense);
}

bool fail(LineError& error, int field, std::string why) {
  error.column = field + 1;
  error.reason = std::move(why);
  return false;
}

}  // namespace

CriteoParser::CriteoParser(bool strict) : strict_(strict) {
  for (int n = 0; n < 1024; ++n) small_log1p_[n] = dense_transform(double(n));
  for (int t = 0; t < kNumTables; ++t) empty_key_[t] = feature_key(uint32_t(t), std::string_view());
}

bool CriteoParser::parse(std::string_view line, Batch& batch, LineError& error) {
  const char* p = line.data();
  const char* const end = p + line.size();
  bool more = true;  // false once the last field of the line is taken: the rest are empty
  auto next_field = [&]() -> std::string_view {
    if (!more) return {};
    // A plain loop: Criteo fields are 0-16 bytes, too short for memchr's set-up to pay.
    const char* stop = p;
    while (stop != end && *stop != '\t') ++stop;
    std::string_view field(p, size_t(stop - p));
    if (stop != end)
      p = stop + 1;
    else
      more = false;
    return field;
  };

  const std::string_view label = next_field();
  if (label.size() != 1 || (label[0] != '0' && label[0] != '1')) {
    return fail(error, 0, "label '" + quote_field(label) + "' is not 0 or 1");
  }
  batch.labels.push_back(label[0] == '1' ? 1.0f : 0.0f);

  const size_t at = batch.dense.size();
  batch.dense.resize(at + kNumDense);
  float* dense = batch.dense.data() + at;
  for (int j = 0; j < kNumDense; ++j) {
    if (!more && strict_) {
      return fail(error, 1 + j,
                  "the line ends after " + column_name(j) + ": " +
                      (j + 1 == kNumDense ? column_name(kNumDense) + " is"
                                          : column_name(1 + j) + ".." + column_name(kNumDense) + " are") +
                      " missing (with data.strict only the trailing categoricals C1..C26 may be stripped)");
    }
    const std::string_view field = next_field();
    if (field.empty()) {
      dense[j] = 0.0f;
      continue;
    }
    int64_t value = 0;
    const auto [stop, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (ec == std::errc::result_out_of_range) {
      return fail(error, 1 + j,
                  column_name(1 + j) + " = '" + quote_field(field) + "' overflows a 64-bit integer");
    }
    if (ec != std::errc() || stop != field.data() + field.size()) {
      return fail(error, 1 + j, column_name(1 + j) + " = '" + quote_field(field) + "' is not an integer");
    }
    dense[j] = value < 1024 ? small_log1p_[value < 0 ? 0 : value] : dense_transform(double(value));
  }

  for (int t = 0; t < kNumTables; ++t) {
    const std::string_view field = next_field();
    const int f = 1 + kNumDense + t;
    if (field.empty()) {
      batch.tables[size_t(t)].keys.push_back(empty_key_[t]);
      continue;
    }
    if (!is_hex(field)) {
      return fail(error, f, column_name(f) + " = '" + quote_field(field) + "' is not 1-16 hex digits");
    }
    batch.tables[size_t(t)].keys.push_back(feature_key(uint32_t(t), field));
  }

  if (more) {
    int fields = kNumFields + 1;
    for (const char* q = p; (q = static_cast<const char*>(std::memchr(q, '\t', size_t(end - q)))); ++q)
      ++fields;
    return fail(error, kNumFields,
                std::to_string(fields) + " fields, expected at most " + std::to_string(kNumFields));
  }
  return true;
}

}  // namespace strata::data
