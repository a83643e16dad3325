#include "runtime/shared_tables.hpp"

#include <optional>

namespace strata::runtime {
namespace {

std::optional<SharedTablesPlan>& current() {
  static std::optional<SharedTablesPlan> plan;
  return plan;
}

}  // namespace

const SharedTablesPlan* shared_tables() { return current() ? &*current() : nullptr; }

SharedTablesScope::SharedTablesScope(SharedTablesPlan plan) { current() = std::move(plan); }

SharedTablesScope::~SharedTablesScope() { current().reset(); }

}  // namespace strata::runtime
