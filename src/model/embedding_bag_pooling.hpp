// EmbeddingBagPooling: pools the rows of each sample's bag of one table (sum or mean)
// and sends the pooled gradient back to the unique rows. The rows themselves live in
// the parameter store; this layer only sees them for one batch.
#pragma once

#include <string>

#include "backend/embedding_kernels.hpp"
#include "data/batch.hpp"

namespace strata::model {

using backend::PoolingMode;

// "sum" | "mean"; anything else is a strata::Error naming model.pooling.
PoolingMode parse_pooling(const std::string& name);

class EmbeddingBagPooling {
 public:
  EmbeddingBagPooling(int dim, PoolingMode mode) : dim_(dim), mode_(mode) {}

  int dim() const { return dim_; }
  PoolingMode mode() const { return mode_; }

  // pooled (batch, dim) from rows (U, dim) of bags.unique_keys; bags.offsets (batch + 1),
  // bags.index (nnz). An empty bag pools to zeros (for mean too).
  void forward(const data::SparseBags& bags, int batch, const float* rows, float* pooled) const;

  // row_grads (U, dim) overwritten: for every unique row the sum of dpooled (batch, dim)
  // over its occurrences, in sample order (b ascending, then position in the bag).
  void backward(const data::SparseBags& bags, int batch, const float* dpooled, float* row_grads);

 private:
  int dim_;
  PoolingMode mode_;
  backend::RowGatherScratch scratch_;
};

}  // namespace strata::model
