// DenseParameters: named slices of one flat values/grads buffer.
#include "model/dense_parameters.hpp"

#include <algorithm>
#include <string>

#include "common/error.hpp"

namespace strata::model {

size_t ParameterSlice::size() const {
  size_t n = 1;
  for (int64_t extent : shape) n *= size_t(extent);
  return n;
}

size_t DenseParameters::add(const std::string& name, std::vector<int64_t> shape) {
  if (!values_.empty())
    throw Error("dense parameter '" + name + "' added after DenseParameters::finalize()",
                "register every slice before finalize()");
  for (int64_t extent : shape)
    if (extent < 0) throw Error("dense parameter '" + name + "' has a negative extent");
  for (const ParameterSlice& s : slices_)
    if (s.name == name) throw Error("dense parameter '" + name + "' registered twice");
  ParameterSlice slice;
  slice.name = name;
  slice.offset = total_;
  slice.shape = std::move(shape);
  total_ += slice.size();
  slices_.push_back(std::move(slice));
  return slices_.back().offset;
}

void DenseParameters::finalize() {
  values_.assign(total_, 0.0f);
  grads_.assign(total_, 0.0f);
}

void DenseParameters::zero_grads() { std::fill(grads_.begin(), grads_.end(), 0.0f); }

const ParameterSlice& DenseParameters::slice(const std::string& name) const {
  for (const ParameterSlice& s : slices_)
    if (s.name == name) return s;
  throw Error("no dense parameter named '" + name + "'");
}

std::vector<float> DenseSharding::local_of(const std::vector<float>& full, int arrays) const {
  if (arrays < 0 || full.size() != size_t(arrays) * full_size) {
    throw Error("dense arrays of " + std::to_string(full.size()) + " floats, expected " + std::to_string(arrays) +
                " x " + std::to_string(full_size) + " (the whole model's dense parameters)");
  }
  std::vector<float> local;
  local.reserve(size_t(arrays) * local_size());
  for (int a = 0; a < arrays; ++a) {
    const float* array = full.data() + size_t(a) * full_size;
    local.insert(local.end(), array, array + replicated);
    local.insert(local.end(), array + shard_offset(), array + shard_offset() + shard_size);
  }
  return local;
}

}  // namespace strata::model
