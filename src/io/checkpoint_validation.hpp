// validate_checkpoint: is this file one a run can resume from? Used before a
// resume (newest candidate first) and by `strata ckpt verify`.
#pragma once

#include <string>

#include "io/checkpoint_records.hpp"

namespace strata::io {

// Opens `path` serially and checks, without reading the sparse rows unless
// `verify_rows`: that it is a strata checkpoint of a format version this build
// reads, that every group and dataset is there with the type and shape the
// header and the other datasets imply, that the dense, trainer and producer
// data match their checksums (and the rows theirs, with verify_rows), and that
// it matches `expected` (fields left at -1 / "" are not checked).
// strata::Error naming the file, the field or dataset, and a fix otherwise.
void validate_checkpoint(const std::string& path, const ExpectedShape& expected, bool verify_rows = false);

}  // namespace strata::io
