// checkpoint_params_digest: reads the state back in params_digest's canonical
// order and hands it to params_digest itself, so the two cannot disagree.
#include "io/checkpoint_digest.hpp"

#include <algorithm>
#include <numeric>

#include "common/error.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/params_digest.hpp"

namespace strata::io {

std::string checkpoint_params_digest(const std::string& path) {
  const CheckpointReader reader(MPI_COMM_SELF, path);
  SparseRows rows = reader.read_rows(0, reader.num_rows());
  const size_t n = rows.ids.size();
  // Servers write their rows in (table, key) order, so one server's file needs no sort.
  if (!std::is_sorted(rows.ids.begin(), rows.ids.end())) {
    std::vector<size_t> order(n);  // (n) file row of each sorted row
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows.ids[a] < rows.ids[b]; });
    SparseRows sorted;
    sorted.width = rows.width;
    sorted.ids.resize(n);
    sorted.counts.resize(n);
    sorted.values.resize(rows.values.size());
    const size_t width = size_t(rows.width);
    for (size_t i = 0; i < n; ++i) {
      sorted.ids[i] = rows.ids[order[i]];
      sorted.counts[i] = rows.counts[order[i]];
      std::copy_n(rows.values.data() + order[i] * width, width, sorted.values.data() + i * width);
    }
    rows = std::move(sorted);
  }
  const auto duplicate = std::adjacent_find(rows.ids.begin(), rows.ids.end());
  if (duplicate != rows.ids.end()) {
    throw Error("checkpoint '" + path + "' holds row (table " + std::to_string(duplicate->table) + ", key " +
                    std::to_string(duplicate->key) + ") twice; every row must be written exactly once",
                "the checkpoint was written wrongly: resume from another one, and report the bug");
  }
  return params_digest(reader.dense_values(), reader.dense_optimizer_state(), reader.header().dense_optimizer_steps,
                       rows);
}

}  // namespace strata::io
