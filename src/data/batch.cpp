// Batch bookkeeping: reset, per-table key de-duplication and the producer ->
// trainer wire format (only the de-duplicated form travels).
#include "data/batch.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "comm/wire.hpp"
#include "common/error.hpp"

namespace strata::data {

void Batch::reset(int32_t num_dense_features, int32_t num_tables, int32_t tasks) {
  // Clears in place so that a batch reused step after step keeps its capacity.
  first_sample = -1;
  size = 0;
  num_dense = num_dense_features;
  num_tasks = tasks;
  labels.clear();
  dense.clear();
  tables.resize(static_cast<size_t>(num_tables));
  for (SparseBags& bags : tables) {
    bags.offsets.assign(1, 0);
    bags.keys.clear();
    bags.unique_keys.clear();
    bags.index.clear();
    bags.keys_of = -1;
  }
}

namespace {

// Sorts (key, id) pairs by key. Row keys are hashes, uniform over 64 bits, so one
// counting pass on the top bits leaves buckets of ~2 pairs that insertion sort
// finishes: ~3x faster than std::sort at these sizes. Skewed keys only make some
// buckets larger, which fall back to std::sort.
void sort_by_key(std::vector<std::pair<uint64_t, int32_t>>& pairs,
                 std::vector<std::pair<uint64_t, int32_t>>& out, std::vector<uint32_t>& start) {
  const size_t n = pairs.size();
  if (n < 64) {
    std::sort(pairs.begin(), pairs.end());
    return;
  }
  int bits = 1;
  while ((size_t(1) << (bits + 1)) <= n) ++bits;  // ~n/2 .. n buckets
  const size_t buckets = size_t(1) << bits;
  const int shift = 64 - bits;
  start.assign(buckets + 1, 0);
  for (const auto& p : pairs) ++start[(p.first >> shift) + 1];
  for (size_t b = 0; b < buckets; ++b) start[b + 1] += start[b];
  out.resize(n);
  for (const auto& p : pairs) out[start[p.first >> shift]++] = p;
  // start[b] is now the end of bucket b.
  size_t begin = 0;
  for (size_t b = 0; b < buckets; ++b) {
    const size_t end = start[b];
    if (end - begin > 16) {
      std::sort(out.begin() + ptrdiff_t(begin), out.begin() + ptrdiff_t(end));
    } else {
      for (size_t i = begin + 1; i < end; ++i) {
        const auto value = out[i];
        size_t j = i;
        for (; j > begin && out[j - 1].first > value.first; --j) out[j] = out[j - 1];
        out[j] = value;
      }
    }
    begin = end;
  }
  pairs.swap(out);
}

void deduplicate_table(SparseBags& bags) {
  const size_t nnz = bags.keys.size();
  if (nnz == 0) {
    // Either an empty table or one already de-duplicated: keep what is there.
    if (bags.index.empty()) bags.unique_keys.clear();
    return;
  }
  // Hash first, sort only the unique keys: with Zipf-skewed batches U is a fraction
  // of nnz, and an open-addressing table of ~2 nnz slots stays in L1/L2. This is
  // ~4x faster than sorting (key, position) pairs at 256-4096 keys per table.
  struct Scratch {
    struct Slot {
      uint64_t key;
      int32_t id;  // -1 = empty
    };
    std::vector<Slot> slots;                           // (capacity) open addressing, linear probing
    std::vector<int32_t> first_id;                     // (nnz) insertion-order id of each key
    std::vector<std::pair<uint64_t, int32_t>> unique;  // (U) key, insertion-order id
    std::vector<int32_t> rank;                         // (U) insertion-order id -> sorted position
    std::vector<std::pair<uint64_t, int32_t>> sorted;  // (U) bucket-sort output
    std::vector<uint32_t> bucket_start;
  };
  thread_local Scratch s;
  size_t capacity = 16;
  while (capacity < 2 * nnz) capacity *= 2;
  const size_t mask = capacity - 1;
  int shift = 64;
  for (size_t c = capacity; c > 1; c >>= 1) --shift;
  s.slots.assign(capacity, {0, -1});
  s.first_id.resize(nnz);
  s.unique.clear();
  for (size_t i = 0; i < nnz; ++i) {
    const uint64_t key = bags.keys[i];
    // Fibonacci hashing: keys from tests or other hashes need not be uniform in the low bits.
    size_t slot = size_t((key * 0x9e3779b97f4a7c15ULL) >> shift);
    while (s.slots[slot].id >= 0 && s.slots[slot].key != key) slot = (slot + 1) & mask;
    if (s.slots[slot].id < 0) {
      s.slots[slot] = {key, int32_t(s.unique.size())};
      s.unique.emplace_back(key, int32_t(s.unique.size()));
    }
    s.first_id[i] = s.slots[slot].id;
  }
  sort_by_key(s.unique, s.sorted, s.bucket_start);
  const size_t u = s.unique.size();
  s.rank.resize(u);
  bags.unique_keys.resize(u);
  for (size_t r = 0; r < u; ++r) {
    bags.unique_keys[r] = s.unique[r].first;
    s.rank[size_t(s.unique[r].second)] = int32_t(r);
  }
  bags.index.resize(nnz);
  for (size_t i = 0; i < nnz; ++i) bags.index[i] = s.rank[size_t(s.first_id[i])];
  bags.keys.clear();
}

// ---- wire format --------------------------------------------------------------
// Native byte order (producers and trainers run the same binary on one cluster),
// written with comm::ByteWriter (arrays: u64 count, padding to their alignment, values):
//   u32 magic, u32 version, i64 first_sample, i32 size, i32 num_dense, i32 num_tables,
//   i32 num_tasks, i32 reserved (0), f32 labels[size * num_tasks], f32 dense[size * num_dense],
//   per table: i32 keys_of, i32 offsets[size + 1], u64 unique_keys[U], i32 index[offsets[size]]
//   (a tied table, keys_of >= 0, has U = 0 and indexes table keys_of's unique keys).
constexpr uint32_t kWireMagic = 0x42525453;  // "STRB"
constexpr uint32_t kWireVersion = 4;

Error malformed_batch(const std::string& why) {
  return Error("malformed batch buffer: " + why,
               "producer and trainer must run the same strata build; this is a bug if they do");
}

// Copies a view of the buffer into out, reusing out's capacity.
template <class T>
void take(comm::ByteReader& in, std::vector<T>& out, uint64_t expected, const char* what) {
  comm::Span<T> view;
  try {
    view = in.view_array<T>();
  } catch (const Error&) {
    throw malformed_batch(std::string("truncated in ") + what);
  }
  if (expected != UINT64_MAX && view.size != expected) {
    throw malformed_batch(std::string(what) + ": " + std::to_string(view.size) + " values, expected " +
                          std::to_string(expected));
  }
  out.assign(view.begin(), view.end());
}

}  // namespace

void deduplicate(Batch& batch) {
  for (SparseBags& bags : batch.tables) {
    deduplicate_table(bags);
    bags.keys_of = -1;
  }
}

void deduplicate(Batch& batch, const std::vector<int32_t>& keys_of) {
  if (keys_of.empty()) return deduplicate(batch);
  const size_t n = batch.tables.size();
  if (keys_of.size() != n) {
    throw Error("deduplicate: " + std::to_string(keys_of.size()) + " table ties for a batch of " +
                    std::to_string(n) + " tables",
                "give one entry per table (-1 for a table of its own)");
  }
  for (size_t t = 0; t < n; ++t) {
    const int32_t s = keys_of[t];
    if (s != -1 && (s < 0 || size_t(s) >= t || keys_of[size_t(s)] != -1)) {
      throw Error("deduplicate: table " + std::to_string(t) + " is tied to table " + std::to_string(s),
                  "tie a table only to a lower table that is not tied itself");
    }
  }
  for (size_t t = 0; t < n; ++t) {
    if (keys_of[t] >= 0) continue;
    SparseBags& own = batch.tables[t];
    own.keys_of = -1;
    // The union of the tied tables' keys, de-duplicated as one table, then split.
    const size_t own_keys = own.keys.size();
    bool tied = false;
    for (size_t u = t + 1; u < n; ++u) {
      if (keys_of[u] != int32_t(t)) continue;
      tied = true;
      own.keys.insert(own.keys.end(), batch.tables[u].keys.begin(), batch.tables[u].keys.end());
    }
    if (!tied) {
      deduplicate_table(own);
      continue;
    }
    if (own.keys.empty()) {
      // Every tied table empty, or already de-duplicated: keep what is there.
      for (size_t u = t + 1; u < n; ++u) {
        if (keys_of[u] == int32_t(t) && batch.tables[u].index.empty()) batch.tables[u].keys_of = int32_t(t);
      }
      if (own.index.empty()) own.unique_keys.clear();
      continue;
    }
    deduplicate_table(own);
    size_t at = own_keys;
    for (size_t u = t + 1; u < n; ++u) {
      if (keys_of[u] != int32_t(t)) continue;
      SparseBags& other = batch.tables[u];
      const size_t count = other.keys.size();
      other.index.assign(own.index.begin() + ptrdiff_t(at), own.index.begin() + ptrdiff_t(at + count));
      other.unique_keys.clear();
      other.keys.clear();
      other.keys_of = int32_t(t);
      at += count;
    }
    own.index.resize(own_keys);
  }
}

void serialize(const Batch& batch, std::vector<char>& out) {
  const size_t b = static_cast<size_t>(batch.size);
  if (batch.size < 0 || batch.num_dense < 0 || batch.num_tasks < 1 ||
      batch.labels.size() != b * static_cast<size_t>(batch.num_tasks) ||
      batch.dense.size() != b * static_cast<size_t>(batch.num_dense)) {
    throw Error("serialize: batch labels/dense do not match size " + std::to_string(batch.size),
                "fill num_tasks labels and num_dense values per sample");
  }
  size_t bytes = 72 + b * sizeof(float) * (size_t(batch.num_tasks) + static_cast<size_t>(batch.num_dense));
  for (const SparseBags& bags : batch.tables) {
    bytes += (b + 1) * 4 + 40 + bags.unique_keys.size() * 8 + bags.index.size() * 4;
  }
  out.reserve(out.size() + bytes);
  comm::ByteWriter writer(out);
  writer.put(kWireMagic);
  writer.put(kWireVersion);
  writer.put(batch.first_sample);
  writer.put(batch.size);
  writer.put(batch.num_dense);
  writer.put(static_cast<int32_t>(batch.tables.size()));
  writer.put(batch.num_tasks);
  writer.put(int32_t{0});
  writer.put_vector(batch.labels);
  writer.put_vector(batch.dense);
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    const SparseBags& bags = batch.tables[t];
    if (bags.offsets.size() != b + 1 || bags.offsets.front() != 0) {
      throw Error("serialize: table " + std::to_string(t) + " has " + std::to_string(bags.offsets.size()) +
                      " offsets for " + std::to_string(b) + " samples",
                  "offsets must hold size + 1 entries starting at 0");
    }
    if (!bags.keys.empty() || bags.index.size() != static_cast<size_t>(bags.offsets.back())) {
      throw Error("serialize: table " + std::to_string(t) + " is not de-duplicated",
                  "call deduplicate(batch) before serialize(batch)");
    }
    if (bags.keys_of >= 0 && (size_t(bags.keys_of) >= t || batch.tables[size_t(bags.keys_of)].keys_of >= 0 ||
                              !bags.unique_keys.empty())) {
      throw Error("serialize: table " + std::to_string(t) + " is tied to table " + std::to_string(bags.keys_of) +
                      " inconsistently",
                  "tie tables through deduplicate(batch, keys_of)");
    }
    writer.put(bags.keys_of);
    writer.put_vector(bags.offsets);
    writer.put_vector(bags.unique_keys);
    writer.put_vector(bags.index);
  }
}

std::vector<char> serialize(const Batch& batch) {
  std::vector<char> out;
  serialize(batch, out);
  return out;
}

void deserialize(const char* bytes, size_t size, Batch& batch) {
  if (bytes == nullptr && size != 0) throw malformed_batch("null buffer");
  comm::ByteReader in(bytes, size, "batch buffer");
  const auto header = [&](auto value) {
    try {
      return in.get<decltype(value)>();
    } catch (const Error&) {
      throw malformed_batch("truncated in header");
    }
  };
  if (header(uint32_t{}) != kWireMagic) throw malformed_batch("bad magic");
  const uint32_t version = header(uint32_t{});
  if (version != kWireVersion) {
    throw malformed_batch("wire version " + std::to_string(version) + ", expected " +
                          std::to_string(kWireVersion));
  }
  batch.first_sample = header(int64_t{});
  batch.size = header(int32_t{});
  batch.num_dense = header(int32_t{});
  const int32_t num_tables = header(int32_t{});
  batch.num_tasks = header(int32_t{});
  header(int32_t{});  // reserved
  if (batch.size < 0 || batch.num_dense < 0 || num_tables < 0 || batch.num_tasks < 1 || batch.num_tasks > 1024) {
    throw malformed_batch("negative size, num_dense or num_tables, or num_tasks outside [1, 1024]");
  }
  const uint64_t b = static_cast<uint64_t>(batch.size);
  if (b > in.remaining() / sizeof(float) / uint64_t(batch.num_tasks)) throw malformed_batch("truncated in labels");
  take(in, batch.labels, b * uint64_t(batch.num_tasks), "labels");
  take(in, batch.dense, b * static_cast<uint64_t>(batch.num_dense), "dense");
  // Each table needs at least its offsets: reject absurd table counts before
  // allocating for them.
  if (static_cast<uint64_t>(num_tables) > in.remaining() / ((b + 1) * 4 + 24)) {
    throw malformed_batch("truncated in tables");
  }
  batch.tables.resize(static_cast<size_t>(num_tables));
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    SparseBags& bags = batch.tables[t];
    try {
      bags.keys_of = in.get<int32_t>();
    } catch (const Error&) {
      throw malformed_batch("truncated in tables");
    }
    if (bags.keys_of != -1 &&
        (bags.keys_of < 0 || size_t(bags.keys_of) >= t || batch.tables[size_t(bags.keys_of)].keys_of != -1)) {
      throw malformed_batch("table " + std::to_string(t) + " tied to table " + std::to_string(bags.keys_of));
    }
    take(in, bags.offsets, b + 1, "offsets");
    if (bags.offsets[0] != 0) throw malformed_batch("offsets do not start at 0");
    for (uint64_t i = 0; i < b; ++i) {
      if (bags.offsets[i + 1] < bags.offsets[i]) throw malformed_batch("offsets decrease");
    }
    take(in, bags.unique_keys, UINT64_MAX, "unique keys");
    for (size_t i = 1; i < bags.unique_keys.size(); ++i) {
      if (bags.unique_keys[i] <= bags.unique_keys[i - 1]) {
        throw malformed_batch("unique keys not strictly ascending");
      }
    }
    if (bags.keys_of >= 0 && !bags.unique_keys.empty()) throw malformed_batch("a tied table with keys of its own");
    take(in, bags.index, static_cast<uint64_t>(bags.offsets[b]), "index");
    const int64_t num_unique = static_cast<int64_t>(
        (bags.keys_of >= 0 ? batch.tables[size_t(bags.keys_of)] : bags).unique_keys.size());
    for (int32_t idx : bags.index) {
      if (idx < 0 || idx >= num_unique) throw malformed_batch("index out of range");
    }
    bags.keys.clear();
  }
  if (in.remaining() != 0) {
    throw malformed_batch(std::to_string(in.remaining()) + " trailing bytes");
  }
}

Batch deserialize(const char* bytes, size_t size) {
  Batch batch;
  deserialize(bytes, size, batch);
  return batch;
}

}  // namespace strata::data
