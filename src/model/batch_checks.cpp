#include "model/batch_checks.hpp"

namespace strata::model {

void check_sparse_tables(const data::Batch& batch, const std::vector<const float*>& rows,
                         const std::vector<float*>* row_grads, const std::function<Error(const std::string&)>& fail,
                         bool reads_tied_tables) {
  const int B = batch.size;
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    const std::string table = "table " + std::to_string(t);
    const data::SparseBags& bags = batch.tables[t];
    if (bags.offsets.size() != size_t(B) + 1 || bags.offsets[0] != 0)
      throw fail(table + ": offsets must have B + 1 entries starting at 0");
    for (int b = 0; b < B; ++b)
      if (bags.offsets[b + 1] < bags.offsets[b]) throw fail(table + ": offsets decrease");
    if (bags.index.size() != size_t(bags.offsets[B])) throw fail(table + ": index must have offsets[B] entries");
    if (bags.keys_of >= 0 && !reads_tied_tables)
      throw fail(table + ": tied to table " + std::to_string(bags.keys_of) + ", which this model does not read");
    if (bags.keys_of >= 0 && (size_t(bags.keys_of) >= t || batch.tables[size_t(bags.keys_of)].keys_of >= 0 ||
                              !bags.unique_keys.empty()))
      throw fail(table + ": tied to table " + std::to_string(bags.keys_of) + " inconsistently");
    // A tied table indexes the rows of the table it reads.
    const int32_t U = int32_t(batch.tables[size_t(data::keys_table(batch, int(t)))].unique_keys.size());
    for (int32_t i : bags.index)
      if (i < 0 || i >= U) throw fail(table + ": index out of range");
    const bool has_rows = !bags.unique_keys.empty();  // a tied table reads another table's rows
    if (has_rows && rows[t] == nullptr) throw fail(table + ": rows is null");
    if (has_rows && row_grads != nullptr && (*row_grads)[t] == nullptr) throw fail(table + ": row_grads is null");
  }
}

}  // namespace strata::model
