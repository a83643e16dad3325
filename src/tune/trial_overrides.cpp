// Trial -> command-line overrides.
#include "tune/trial_overrides.hpp"

#include <cstdlib>

#include "common/error.hpp"

namespace strata {

namespace {

// A whole number >= 0 without sign or trailing text.
bool parse_count(const std::string& text, int& value) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) return false;
  value = std::atoi(text.c_str());
  return true;
}

}  // namespace

LayoutSplit parse_layout_split(const std::string& text) {
  LayoutSplit split;
  const auto first = text.find('/');
  const auto second = first == std::string::npos ? std::string::npos : text.find('/', first + 1);
  if (second == std::string::npos || text.find('/', second + 1) != std::string::npos ||
      !parse_count(text.substr(0, first), split.producers) ||
      !parse_count(text.substr(first + 1, second - first - 1), split.trainers) ||
      !parse_count(text.substr(second + 1), split.servers)) {
    throw Error("bad layout '" + text + "'",
                "write a layout as producers/trainers/servers, e.g. 1/2/1");
  }
  return split;
}

std::vector<std::string> overrides(const Trial& trial) {
  std::vector<std::string> args;
  for (const auto& setting : trial.settings) {
    if (setting.name == "layout") {
      const LayoutSplit split = parse_layout_split(setting.text);
      args.push_back("--layout.producers=" + std::to_string(split.producers));
      args.push_back("--layout.trainers=" + std::to_string(split.trainers));
      args.push_back("--layout.servers=" + std::to_string(split.servers));
    } else {
      args.push_back("--" + setting.name + "=" + setting.text);
    }
  }
  return args;
}

}  // namespace strata
