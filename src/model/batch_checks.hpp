// The checks every model makes of a batch's sparse tables before reading them:
// jagged offsets (B + 1 entries from 0, never decreasing), an index entry per
// key that points into the table's unique keys, and rows (and row gradients
// when training) wherever a table has keys. One place, so that every model
// refuses a malformed batch with the same words.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/batch.hpp"

namespace strata::model {

// fail(what) makes the model's error ("<Model>: malformed batch: <what>" and its fix).
// Assumes batch.tables, rows and *row_grads hold one entry per table (the caller checks).
// Tied tables (data::SparseBags::keys_of) are refused unless the model reads them.
void check_sparse_tables(const data::Batch& batch, const std::vector<const float*>& rows,
                         const std::vector<float*>* row_grads, const std::function<Error(const std::string&)>& fail,
                         bool reads_tied_tables = false);

}  // namespace strata::model
