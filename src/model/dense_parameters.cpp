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

DenseSharding DenseSharding::of(std::vector<ParameterSlice> full_slices, size_t full_size,
                                std::vector<Segment> segments, int member, int members) {
  if (members < 1 || member < 0 || member >= members) {
    throw Error("DenseSharding: member " + std::to_string(member) + " of " + std::to_string(members) + " (bug)");
  }
  DenseSharding s;
  s.full_slices = std::move(full_slices);
  s.full_size = full_size;
  s.member = member;
  s.members = members;
  size_t at = 0;
  for (const Segment& segment : segments) {
    if (segment.size == 0) continue;
    if (segment.begin != at || (segment.sharded && segment.size % size_t(members) != 0)) {
      throw Error("DenseSharding: a segment [" + std::to_string(segment.begin) + ", +" +
                  std::to_string(segment.size) + ") does not follow " + std::to_string(at) +
                  " or split in " + std::to_string(members) + " (bug)");
    }
    (segment.sharded ? s.shard_size : s.replicated) += segment.sharded ? segment.size / size_t(members) : segment.size;
    s.segments.push_back(segment);
    at += segment.size;
  }
  if (at != full_size) {
    throw Error("DenseSharding: the segments cover " + std::to_string(at) + " of " + std::to_string(full_size) +
                " values (bug)");
  }
  return s;
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
    for (const Segment& segment : segments) {
      if (!segment.sharded) local.insert(local.end(), array + segment.begin, array + segment.begin + segment.size);
    }
    for (const Segment& segment : segments) {
      if (!segment.sharded) continue;
      const size_t part = segment.size / size_t(members);
      const float* from = array + segment.begin + size_t(member) * part;
      local.insert(local.end(), from, from + part);
    }
  }
  return local;
}

void DenseSharding::append_whole(const float* replicated_part, const std::vector<const float*>& shards,
                                 std::vector<float>& out) const {
  if (shards.size() != size_t(members)) {
    throw Error("DenseSharding: " + std::to_string(shards.size()) + " shards for " + std::to_string(members) +
                " members (bug)");
  }
  size_t replicated_at = 0, shard_at = 0;
  for (const Segment& segment : segments) {
    if (!segment.sharded) {
      out.insert(out.end(), replicated_part + replicated_at, replicated_part + replicated_at + segment.size);
      replicated_at += segment.size;
      continue;
    }
    const size_t part = segment.size / size_t(members);
    for (const float* shard : shards) out.insert(out.end(), shard + shard_at, shard + shard_at + part);
    shard_at += part;
  }
}

}  // namespace strata::model
