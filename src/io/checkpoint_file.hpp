// The checkpoint file (docs/CHECKPOINT.md): one include for its records, the
// collective writer, the reader, validation before a resume, and its digest.
// The directory of checkpoint files is io/checkpoint_directory.hpp.
#pragma once

#include "io/checkpoint_digest.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/checkpoint_records.hpp"
#include "io/checkpoint_validation.hpp"
#include "io/checkpoint_writer.hpp"
