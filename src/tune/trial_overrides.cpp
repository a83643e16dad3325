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
  const char* forms =
      "write a layout as producers/trainers/servers, e.g. 1/2/1, optionally with the trainers' axes, "
      "e.g. 1/4/1,sp=2,ep=1,dp=2,sp_mode=alltoall";
  LayoutSplit split;
  const auto comma = text.find(',');
  const std::string ranks = text.substr(0, comma);
  const auto first = ranks.find('/');
  const auto second = first == std::string::npos ? std::string::npos : ranks.find('/', first + 1);
  if (second == std::string::npos || ranks.find('/', second + 1) != std::string::npos ||
      !parse_count(ranks.substr(0, first), split.producers) ||
      !parse_count(ranks.substr(first + 1, second - first - 1), split.trainers) ||
      !parse_count(ranks.substr(second + 1), split.servers)) {
    throw Error("bad layout '" + text + "'", forms);
  }
  size_t at = comma;
  while (at != std::string::npos) {
    const auto next = text.find(',', at + 1);
    const std::string part = text.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    const auto equals = part.find('=');
    const std::string key = part.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : part.substr(equals + 1);
    bool ok = equals != std::string::npos;
    if (ok && key == "dp") {
      ok = parse_count(value, split.dp);
    } else if (ok && key == "sp") {
      ok = parse_count(value, split.sp) && split.sp >= 1;
    } else if (ok && key == "ep") {
      ok = parse_count(value, split.ep) && split.ep >= 1;
    } else if (ok && key == "sp_mode") {
      ok = value == "ring" || value == "alltoall";
      split.sp_mode = value;
    } else {
      ok = false;
    }
    if (!ok) throw Error("bad layout '" + text + "': '" + part + "'", forms);
    split.parallel = true;
    at = next;
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
      if (split.parallel) {
        args.push_back("--layout.dp=" + std::to_string(split.dp));
        args.push_back("--layout.sp=" + std::to_string(split.sp));
        args.push_back("--layout.ep=" + std::to_string(split.ep));
        if (!split.sp_mode.empty()) args.push_back("--layout.sp_mode=" + split.sp_mode);
      }
    } else {
      args.push_back("--" + setting.name + "=" + setting.text);
    }
  }
  return args;
}

}  // namespace strata
