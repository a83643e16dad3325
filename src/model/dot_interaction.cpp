// DotInteraction: owns the packed features between forward and backward.
#include "model/dot_interaction.hpp"

#include "backend/dense_kernels.hpp"
#include "backend/embedding_kernels.hpp"
#include "common/error.hpp"

namespace strata::model {


DotInteraction::DotInteraction(int num_features, int dim) : num_features_(num_features), dim_(dim) {
  if (num_features < 1 || dim < 1)
    throw Error("dot interaction needs at least one feature of positive width");
  scratch_.resize(backend::dot_interaction_scratch_size(num_features, dim));
}

int DotInteraction::output_width() const { return backend::dot_interaction_width(num_features_, dim_); }

void DotInteraction::reserve(int batch) {
  if (batch <= capacity_) return;
  packed_.resize(backend::dot_interaction_packed_size(batch, num_features_, dim_));
  capacity_ = batch;
}

void DotInteraction::forward(int batch, const float* const* features, float* out) {
  reserve(batch);
  backend::dot_interaction_forward(batch, num_features_, dim_, features, packed_.data(), out);
}

void DotInteraction::backward(int batch, const float* dout, float* const* dfeatures) {
  reserve(batch);
  backend::dot_interaction_backward(batch, num_features_, dim_, packed_.data(), dout, scratch_.data(),
                                 dfeatures);
}

}  // namespace strata::model
