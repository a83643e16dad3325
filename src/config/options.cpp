#include "config/options.hpp"

#include <charconv>

#include "common/error.hpp"

namespace strata {

std::vector<int> parse_int_list(const std::string& text, const std::string& key) {
  std::vector<int> values;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string_view item(text.data() + start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    int value = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || value <= 0) {
      throw Error("bad value '" + text + "' for " + key + ": '" + std::string(item) +
                      "' is not a positive integer",
                  "give a comma-separated list of positive integers, e.g. " + key + "=64,32");
    }
    values.push_back(value);
    start = end + 1;
  }
  return values;
}

}  // namespace strata
