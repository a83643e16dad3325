#include "store/access_trace.hpp"

#include <cstring>

#include "common/error.hpp"

namespace strata::store {
namespace {
constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'R', 'C', '1'};
}

AccessTraceWriter::AccessTraceWriter(const std::string& path) : file_(std::fopen(path.c_str(), "wb")), path_(path) {
  if (!file_) throw Error("cannot write the access trace '" + path + "'", "set output.trace to a writable path");
  std::fwrite(kMagic, 1, sizeof(kMagic), file_);
}

AccessTraceWriter::~AccessTraceWriter() {
  if (file_) std::fclose(file_);
}

void AccessTraceWriter::write(int64_t round, int32_t owner, const std::vector<RowId>& rows) {
  const uint32_t count = static_cast<uint32_t>(rows.size());
  std::fwrite(&round, sizeof(round), 1, file_);
  std::fwrite(&owner, sizeof(owner), 1, file_);
  std::fwrite(&count, sizeof(count), 1, file_);
  if (count && std::fwrite(rows.data(), sizeof(RowId), count, file_) != count) {
    throw Error("writing the access trace '" + path_ + "' failed", "check free disk space");
  }
}

std::vector<AccessTraceRecord> read_access_trace(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw Error("cannot open access trace '" + path + "'", "write one with strata trace");
  char magic[8] = {};
  if (std::fread(magic, 1, 8, file) != 8 || std::memcmp(magic, kMagic, 8) != 0) {
    std::fclose(file);
    throw Error("'" + path + "' is not a strata access trace (bad magic)", "write one with strata trace");
  }
  std::vector<AccessTraceRecord> records;
  while (true) {
    AccessTraceRecord r;
    uint32_t count = 0;
    if (std::fread(&r.round, sizeof(r.round), 1, file) != 1) break;
    if (std::fread(&r.owner, sizeof(r.owner), 1, file) != 1 || std::fread(&count, sizeof(count), 1, file) != 1) {
      std::fclose(file);
      throw Error("access trace '" + path + "' is truncated in record " + std::to_string(records.size()));
    }
    r.rows.resize(count);
    if (count && std::fread(r.rows.data(), sizeof(RowId), count, file) != count) {
      std::fclose(file);
      throw Error("access trace '" + path + "' is truncated in record " + std::to_string(records.size()));
    }
    records.push_back(std::move(r));
  }
  std::fclose(file);
  return records;
}

}  // namespace strata::store
