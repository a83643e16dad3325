// DenseParameters: every replicated dense weight of a model in one flat buffer,
// with its gradient beside it, so that one all-reduce and one optimizer pass cover
// the whole network and the digest reads the layers in a fixed order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::model {

struct ParameterSlice {
  std::string name;            // e.g. "bottom.0.weight"
  size_t offset = 0;           // into values / grads
  std::vector<int64_t> shape;  // e.g. {out, in}
  size_t size() const;
};

class DenseParameters {
 public:
  // Reserves a named slice; returns its offset. Call before finalize().
  size_t add(const std::string& name, std::vector<int64_t> shape);
  void finalize();  // allocates values and grads (zeroed)

  float* values(size_t offset) { return values_.data() + offset; }
  float* grads(size_t offset) { return grads_.data() + offset; }
  std::vector<float>& values() { return values_; }
  std::vector<float>& grads() { return grads_; }
  const std::vector<float>& values() const { return values_; }
  const std::vector<float>& grads() const { return grads_; }
  const std::vector<ParameterSlice>& slices() const { return slices_; }
  // The slice of that name; strata::Error when there is none.
  const ParameterSlice& slice(const std::string& name) const;
  size_t size() const { return values_.size(); }
  void zero_grads();

 private:
  std::vector<ParameterSlice> slices_;
  std::vector<float> values_;
  std::vector<float> grads_;
  size_t total_ = 0;
};

// Expert-parallel storage: a trainer that holds only its own experts keeps the
// replicated slices and then its experts' slices. This says where its buffer sits
// in the whole model's layout (what one trainer alone holds, and what checkpoints
// and the digest store).
struct DenseSharding {
  std::vector<ParameterSlice> full_slices;  // the whole model's
  size_t full_size = 0;
  size_t replicated = 0;  // local [0, replicated) is full [0, replicated), on every trainer
  size_t shard_size = 0;  // then member m's experts: full [replicated + m shard_size, + shard_size)
  int member = 0;
  int members = 1;
  size_t local_size() const { return replicated + shard_size; }
  size_t shard_offset() const { return replicated + size_t(member) * shard_size; }
  // This trainer's part of `arrays` whole-model arrays laid back to back (the
  // values: 1; an optimizer state: its arrays, each full_size long), in the same
  // layout. strata::Error when full.size() != arrays * full_size.
  std::vector<float> local_of(const std::vector<float>& full, int arrays) const;
};

}  // namespace strata::model
