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
// replicated weights and its part of the experts'. The whole model's layout (what
// one trainer alone holds, and what checkpoints and the digest store) is a run of
// segments, each replicated or sharded: a sharded segment splits into `members`
// equal parts, member m holding part m. A trainer's buffer is every replicated
// segment in order (local [0, replicated)), then its part of every sharded
// segment in order (local [replicated, local_size())), so that one all-reduce
// covers the replicated prefix and one broadcast the shard.
struct DenseSharding {
  struct Segment {
    size_t begin = 0;  // in the whole layout
    size_t size = 0;
    bool sharded = false;
  };
  std::vector<ParameterSlice> full_slices;  // the whole model's
  size_t full_size = 0;
  std::vector<Segment> segments;  // cover [0, full_size) in order
  size_t replicated = 0;          // the replicated segments' total
  size_t shard_size = 0;          // one member's part of every sharded segment, in total
  int member = 0;
  int members = 1;

  // The sharding of a whole layout of full_size values cut at `segments`, for
  // member `member` of `members`; strata::Error (a bug) when the segments do not
  // cover the layout in order or a sharded one does not split evenly.
  static DenseSharding of(std::vector<ParameterSlice> full_slices, size_t full_size, std::vector<Segment> segments,
                          int member, int members);
  size_t local_size() const { return replicated + shard_size; }
  // This trainer's part of `arrays` whole-model arrays laid back to back (the
  // values: 1; an optimizer state: its arrays, each full_size long), in the same
  // layout. strata::Error when full.size() != arrays * full_size.
  std::vector<float> local_of(const std::vector<float>& full, int arrays) const;
  // Appends one whole-model array to `out` from the replicated part (replicated
  // floats, as every member holds it) and each member's shard (shard_size floats).
  void append_whole(const float* replicated_part, const std::vector<const float*>& shards,
                    std::vector<float>& out) const;
};

}  // namespace strata::model
