#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace strata {

void init_logging(int world_rank, const std::string& role, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("strata-r" + std::to_string(world_rank));
  logger->set_pattern("[%H:%M:%S.%e r" + std::to_string(world_rank) + " " + role + "] %^%l%$: %v");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

}  // namespace strata
