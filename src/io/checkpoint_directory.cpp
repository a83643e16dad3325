// Checkpoint directory helpers: naming, the flush-rename-flush publication,
// listing, retention and what --resume points at.
#include "io/checkpoint_directory.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.hpp"

namespace strata::io {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefix = "ckpt-";
constexpr const char* kSuffix = ".h5";
constexpr const char* kTemporarySuffix = ".tmp";

std::string system_error() { return std::strerror(errno); }

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

// Flushes a file or directory to disk.
void sync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? O_RDONLY | O_DIRECTORY : O_RDONLY);
  if (fd < 0) {
    throw Error("cannot open '" + path + "' to flush it: " + system_error(),
                "check that checkpoint.dir exists and is readable");
  }
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  // Some file systems cannot sync a directory; the rename is then as durable as they make it.
  if (status != 0 && !(directory && (error == EINVAL || error == ENOTSUP))) {
    throw Error("cannot flush '" + path + "' to disk: " + std::strerror(error),
                "check the file system of checkpoint.dir (full, read-only, or failing)");
  }
}

struct Listing {
  std::vector<std::pair<int64_t, std::string>> complete;   // (step, path)
  std::vector<std::pair<int64_t, std::string>> temporary;  // (step, path) of <name>.tmp
};

Listing list_directory(const std::string& dir) {
  Listing listing;
  std::error_code ec;
  if (!fs::exists(dir, ec)) return listing;
  if (!fs::is_directory(dir, ec)) {
    throw Error("checkpoint directory '" + dir + "' is not a directory", "set checkpoint.dir to a directory");
  }
  fs::directory_iterator entries(dir, ec), end;
  if (ec) throw Error("cannot list checkpoint directory '" + dir + "': " + ec.message(), "check its permissions");
  for (; entries != end; entries.increment(ec)) {
    if (ec) throw Error("cannot list checkpoint directory '" + dir + "': " + ec.message(), "check its permissions");
    const std::string name = entries->path().filename().string();
    std::error_code type_error;
    if (!entries->is_regular_file(type_error)) continue;
    if (const int64_t step = checkpoint_step(name); step >= 0) {
      listing.complete.emplace_back(step, entries->path().string());
    } else if (ends_with(name, kTemporarySuffix)) {
      const int64_t temporary_step = checkpoint_step(name.substr(0, name.size() - std::strlen(kTemporarySuffix)));
      if (temporary_step >= 0) listing.temporary.emplace_back(temporary_step, entries->path().string());
    }
  }
  std::sort(listing.complete.begin(), listing.complete.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  return listing;
}

}  // namespace

std::string checkpoint_file_name(int64_t step) {
  if (step < 0) throw Error("checkpoint of step " + std::to_string(step), "steps are >= 0");
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%010lld", static_cast<long long>(step));
  return kPrefix + std::string(digits) + kSuffix;
}

int64_t checkpoint_step(const std::string& name) {
  const size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 || !ends_with(name, kSuffix)) return -1;
  const std::string digits = name.substr(prefix, name.size() - prefix - suffix);
  if (digits.size() < 10 || digits.size() > 18) return -1;  // what checkpoint_file_name writes
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    step = step * 10 + (c - '0');
  }
  return step;
}

std::string temporary_path(const std::string& final_path) { return final_path + kTemporarySuffix; }

void publish_checkpoint(const std::string& temporary, const std::string& final_path) {
  sync_path(temporary, false);
  if (std::rename(temporary.c_str(), final_path.c_str()) != 0) {
    throw Error("cannot rename checkpoint '" + temporary + "' to '" + final_path + "': " + system_error(),
                "check the permissions of checkpoint.dir");
  }
  const std::string dir = fs::path(final_path).parent_path().string();
  sync_path(dir.empty() ? "." : dir, true);
}

std::vector<std::string> complete_checkpoints(const std::string& dir) {
  std::vector<std::string> paths;
  for (const auto& [step, path] : list_directory(dir).complete) paths.push_back(path);
  return paths;
}

void remove_old_checkpoints(const std::string& dir, int keep) {
  if (keep < 1) throw Error("checkpoint.keep = " + std::to_string(keep), "keep at least 1 checkpoint");
  const Listing listing = list_directory(dir);
  std::vector<std::string> doomed;
  for (size_t i = size_t(keep); i < listing.complete.size(); ++i) doomed.push_back(listing.complete[i].second);
  if (!listing.complete.empty()) {
    // Leftovers of interrupted writes; a newer .tmp may be a write in progress.
    for (const auto& [step, path] : listing.temporary) {
      if (step <= listing.complete.front().first) doomed.push_back(path);
    }
  }
  std::string failures;
  for (const std::string& path : doomed) {
    std::error_code ec;
    if (!fs::remove(path, ec) && ec) failures += "\n  " + path + ": " + ec.message();
  }
  if (!failures.empty()) {
    throw Error("cannot remove old checkpoints:" + failures, "check the permissions of checkpoint.dir");
  }
}

int remove_all_checkpoints(const std::string& dir) {
  const Listing listing = list_directory(dir);
  std::string failures;
  int removed = 0;
  for (const auto* files : {&listing.complete, &listing.temporary}) {
    for (const auto& [step, path] : *files) {
      std::error_code ec;
      if (fs::remove(path, ec)) {
        removed += 1;
      } else if (ec) {
        failures += "\n  " + path + ": " + ec.message();
      }
    }
  }
  if (!failures.empty()) {
    throw Error("cannot remove the checkpoints of '" + dir + "' (checkpoint.overwrite = true):" + failures,
                "check the permissions of checkpoint.dir");
  }
  return removed;
}

std::vector<std::string> resume_candidates(const std::string& resume, const std::string& checkpoint_dir) {
  if (resume.empty()) return {};
  const auto from_directory = [](const std::string& dir, const std::string& how) {
    const Listing listing = list_directory(dir);
    if (listing.complete.empty()) {
      std::string why = "no complete checkpoint (ckpt-<step>.h5) in '" + dir + "' (" + how + ")";
      if (!listing.temporary.empty()) {
        why += "; its " + std::to_string(listing.temporary.size()) + " .tmp file(s) are unfinished writes";
      }
      throw Error(why, "start without --resume, or point --resume at a checkpoint file or a directory holding one");
    }
    std::vector<std::string> paths;
    for (const auto& [step, path] : listing.complete) paths.push_back(path);
    return paths;
  };
  if (resume == "latest") {
    if (checkpoint_dir.empty()) {
      throw Error("--resume=latest but checkpoint.dir is empty",
                  "set checkpoint.dir to the directory the checkpoints were written to, or pass --resume=DIR|FILE");
    }
    std::error_code ec;
    if (!fs::exists(checkpoint_dir, ec)) {
      throw Error("--resume=latest: checkpoint.dir '" + checkpoint_dir + "' does not exist",
                  "start without --resume, or set checkpoint.dir to where the checkpoints were written");
    }
    return from_directory(checkpoint_dir, "checkpoint.dir, --resume=latest");
  }
  std::error_code ec;
  const fs::file_status status = fs::status(resume, ec);
  if (!fs::exists(status)) {
    throw Error("--resume: '" + resume + "' does not exist",
                "pass a checkpoint file, a directory of checkpoints, or 'latest' (checkpoint.dir)");
  }
  if (fs::is_directory(status)) return from_directory(resume, "--resume");
  if (!fs::is_regular_file(status)) {
    throw Error("--resume: '" + resume + "' is neither a file nor a directory",
                "pass a checkpoint file, a directory of checkpoints, or 'latest'");
  }
  return {resume};
}

}  // namespace strata::io
