// checkpoint_params_digest: the params_digest (io/params_digest.hpp) of the state
// a checkpoint holds, so that a checkpoint can be compared with a run's
// summary.json without resuming it (`strata ckpt digest FILE`).
#pragma once

#include <string>

namespace strata::io {

// params_digest(dense values, dense optimizer state, dense optimizer steps, every
// row sorted by (table, key)) of the checkpoint at `path`, verified against its
// checksums. Holds every row in memory (rows x (row_width x 4 + 24) bytes, twice
// if the file's rows are not already in (table, key) order). strata::Error when the
// file is unreadable or holds a row twice.
std::string checkpoint_params_digest(const std::string& path);

}  // namespace strata::io
