#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace strata {

void init_logging(int world_rank, const std::string& role, const std::string& level) {
  // Called once per job; strata tune runs several jobs in one process, each
  // with the rank's role of that trial.
  const std::string name = "strata-r" + std::to_string(world_rank);
  spdlog::drop(name);
  auto logger = spdlog::stderr_color_mt(name);
  logger->set_pattern("[%H:%M:%S.%e r" + std::to_string(world_rank) + " " + role + "] %^%l%$: %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace strata
