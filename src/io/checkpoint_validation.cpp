// validate_checkpoint: the reader's structural checks, the checksums of the small
// parts (and optionally the rows), then the run's expectations.
#include "io/checkpoint_validation.hpp"

#include "common/error.hpp"
#include "io/checkpoint_reader.hpp"

namespace strata::io {

namespace {

constexpr const char* kShapeFix =
    "resume with the deck the checkpoint was written with ('strata ckpt config FILE' prints it), or start "
    "without --resume";

void expect(const std::string& path, const char* field, int64_t expected, int64_t actual) {
  if (expected < 0 || expected == actual) return;
  throw Error("checkpoint '" + path + "': " + field + " is " + std::to_string(actual) + ", this run has " +
                  std::to_string(expected),
              kShapeFix);
}

void expect(const std::string& path, const char* field, const std::string& expected, const std::string& actual) {
  if (expected.empty() || expected == actual) return;
  throw Error("checkpoint '" + path + "': " + field + " is '" + actual + "', this run uses '" + expected + "'",
              kShapeFix);
}

}  // namespace

void validate_checkpoint(const std::string& path, const ExpectedShape& expected, bool verify_rows) {
  const CheckpointReader reader(MPI_COMM_SELF, path);
  const CheckpointHeader& h = reader.header();
  // The shape first: a file of another model is reported as such, not as damaged.
  expect(path, "embedding_dim", expected.embedding_dim, h.embedding_dim);
  expect(path, "row_width (embedding values + sparse optimizer state)", expected.row_width, h.row_width);
  expect(path, "num_tables", expected.num_tables, h.num_tables);
  expect(path, "num_dense", expected.num_dense, h.num_dense);
  expect(path, "dense_optimizer", expected.dense_optimizer, h.dense_optimizer);
  expect(path, "sparse_optimizer", expected.sparse_optimizer, h.sparse_optimizer);
  expect(path, "the dense size (floats of /dense/values)", expected.dense_values, reader.num_dense_values());
  reader.verify(verify_rows);
}

}  // namespace strata::io
