// Logging through spdlog with the MPI rank and role in every line.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace strata {

// Call once after MPI_Init; later lines read "[strata r3 trainer] ...".
void init_logging(int world_rank, const std::string& role, const std::string& level = "info");

}  // namespace strata
