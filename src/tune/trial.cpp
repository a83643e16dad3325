// Trial values and their text form.
#include "tune/trial.hpp"

#include <charconv>
#include <cmath>

namespace strata {

std::string format_number(double value) {
  char buffer[64];
  // Whole numbers print without an exponent, so that integer keys parse them.
  if (std::nearbyint(value) == value && std::fabs(value) < 1e15) {
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), static_cast<long long>(value));
    return std::string(buffer, result.ptr);
  }
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

KnobSetting KnobSetting::integer(std::string name, int64_t value) {
  return {std::move(name), KnobType::integer, double(value), std::to_string(value)};
}

KnobSetting KnobSetting::real(std::string name, double value) {
  return {std::move(name), KnobType::real, value, format_number(value)};
}

KnobSetting KnobSetting::categorical(std::string name, std::string candidate) {
  return {std::move(name), KnobType::categorical, 0.0, std::move(candidate)};
}

const KnobSetting* Trial::find(const std::string& name) const {
  for (const auto& setting : settings) {
    if (setting.name == name) return &setting;
  }
  return nullptr;
}

}  // namespace strata
