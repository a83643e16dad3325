// EmbeddingBagPooling: thin layer over the embedding-bag kernels of the selected device.
#include "model/embedding_bag_pooling.hpp"

#include "common/error.hpp"

namespace strata::model {

PoolingMode parse_pooling(const std::string& name) {
  if (name == "sum") return PoolingMode::kSum;
  if (name == "mean") return PoolingMode::kMean;
  throw Error("unknown model.pooling '" + name + "'", "set model.pooling to sum or mean");
}

void EmbeddingBagPooling::forward(const data::SparseBags& bags, int batch, const float* rows,
                                  float* pooled) const {
  backend::embedding_bag_forward(batch, dim_, bags.offsets.data(), bags.index.data(), rows,
                                 mode_, pooled, backend::PooledLayout::sample_major(dim_));
}

void EmbeddingBagPooling::backward(const data::SparseBags& bags, int batch, const float* dpooled,
                                   float* row_grads) {
  backend::embedding_bag_backward(batch, dim_, int(bags.unique_keys.size()), bags.offsets.data(),
                                  bags.index.data(), dpooled, backend::PooledLayout::sample_major(dim_), mode_,
                                  row_grads, scratch_);
}

}  // namespace strata::model
