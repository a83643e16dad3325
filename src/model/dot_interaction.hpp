// DotInteraction: DLRM's feature interaction. For F = 1 + num_tables vectors per sample
// (the bottom-MLP output first, then one pooled embedding per table) it emits the
// bottom-MLP output followed by every pairwise dot z_i . z_j, i > j (strictly lower
// triangle, row-major), width dim + F (F - 1) / 2.
#pragma once

#include <vector>

namespace strata::model {

class DotInteraction {
 public:
  DotInteraction(int num_features, int dim);

  int num_features() const { return num_features_; }
  int dim() const { return dim_; }
  int output_width() const;

  void reserve(int batch);

  // features[f] (batch, dim) for f < F; out (batch, output_width()).
  void forward(int batch, const float* const* features, float* out);

  // After forward on the same features: dfeatures[f] (batch, dim) overwritten from
  // dout (batch, output_width()).
  void backward(int batch, const float* dout, float* const* dfeatures);

 private:
  int num_features_;
  int dim_;
  int capacity_ = 0;
  std::vector<float> packed_;   // the forward's features, transposed per block of samples
  std::vector<float> scratch_;  // backward's pair gradients
};

}  // namespace strata::model
