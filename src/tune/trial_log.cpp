// trials.csv and best.ini.
#include "tune/trial_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/error.hpp"

namespace fs = std::filesystem;

namespace strata {

namespace {

// RFC 4180 quoting: only fields that need it are quoted.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) line += (i ? "," : "") + csv_field(fields[i]);
  return line + "\n";
}

// Rows of a CSV text; quoted fields may hold commas, quotes and newlines.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  bool row_has_content = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      row_has_content = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      row_has_content = true;
    } else if (c == '\n') {
      if (row_has_content || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row.clear();
      field.clear();
      row_has_content = false;
    } else if (c != '\r') {
      field += c;
      row_has_content = true;
    }
  }
  // A last line without its newline is an unfinished append: ignore it.
  return rows;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// One write() per call, so that rows of concurrent writers never interleave.
void append(const std::string& path, const std::string& text, int extra_flags = 0) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | extra_flags, 0644);
  if (fd < 0) {
    throw Error("cannot open " + path + " for appending: " + std::strerror(errno),
                "check that output.dir is writable");
  }
  const ssize_t written = ::write(fd, text.data(), text.size());
  const int write_errno = errno;
  ::close(fd);
  if (written != ssize_t(text.size())) {
    throw Error("cannot append to " + path + ": " + (written < 0 ? std::strerror(write_errno) : "short write"),
                "check the free space and permissions of output.dir");
  }
}

TrialOutcome::State parse_state(const std::string& text, bool& ok) {
  ok = true;
  if (text == "complete") return TrialOutcome::State::complete;
  if (text == "pruned") return TrialOutcome::State::pruned;
  if (text == "failed") return TrialOutcome::State::failed;
  ok = false;
  return TrialOutcome::State::failed;
}

std::string joined(const std::vector<std::string>& fields) {
  std::string out;
  for (const auto& field : fields) out += (out.empty() ? "" : ",") + field;
  return out;
}

}  // namespace

TrialLog::TrialLog(std::string dir, const SearchSpace& space, Objective objective)
    : dir_(std::move(dir)), csv_path_(dir_ + "/trials.csv"), knobs_(space.knobs()), objective_(std::move(objective)) {
  std::error_code error;
  fs::create_directories(dir_, error);
  if (error) throw Error("cannot create output folder " + dir_ + ": " + error.message(), "check output.dir");

  const std::string header_line = csv_line(header());
  const int fd = ::open(csv_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd >= 0) {
    ::close(fd);
    append(csv_path_, header_line);
    return;
  }
  if (errno != EEXIST) {
    throw Error("cannot create " + csv_path_ + ": " + std::strerror(errno), "check that output.dir is writable");
  }
  std::string content = read_file(csv_path_);
  if (content.empty()) {
    // Another process may have created it a moment ago and be writing the header.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    content = read_file(csv_path_);
    if (content.empty()) {
      append(csv_path_, header_line);
      return;
    }
  }
  const auto first = content.substr(0, content.find('\n') + 1);
  if (first != header_line) {
    const auto rows = parse_csv(first);
    throw Error(csv_path_ + " has the columns " + (rows.empty() ? first : joined(rows.front())) +
                    " but this search writes " + joined(header()),
                "a different search space needs another output.dir (or move the old trials.csv away)");
  }
}

std::vector<std::string> TrialLog::header() const {
  std::vector<std::string> columns{"trial"};
  for (const auto& knob : knobs_) columns.push_back(knob.name);
  columns.push_back(objective_.name);
  for (const char* column : {"direction", "state", "reason", "seconds"}) columns.push_back(column);
  return columns;
}

void TrialLog::record(const Trial& trial, const TrialOutcome& outcome, double seconds) {
  std::vector<std::string> fields{std::to_string(trial.number)};
  for (const auto& knob : knobs_) {
    const KnobSetting* setting = trial.find(knob.name);
    fields.push_back(setting ? setting->text : "");
  }
  fields.push_back(outcome.state == TrialOutcome::State::complete ? format_number(outcome.value) : "");
  fields.push_back(to_string(objective_.direction));
  fields.push_back(to_string(outcome.state));
  fields.push_back(outcome.reason);
  char seconds_text[32];
  std::snprintf(seconds_text, sizeof(seconds_text), "%.3f", seconds);
  fields.push_back(seconds_text);
  append(csv_path_, csv_line(fields));
}

std::vector<LoggedTrial> TrialLog::read() const {
  const auto columns = header();
  std::vector<LoggedTrial> trials;
  for (const auto& row : parse_csv(read_file(csv_path_))) {
    if (row.size() != columns.size() || row == columns) continue;  // the header, or a torn row
    LoggedTrial logged;
    logged.trial.number = std::strtoll(row[0].c_str(), nullptr, 10);
    for (size_t k = 0; k < knobs_.size(); ++k) {
      const std::string& text = row[1 + k];
      switch (knobs_[k].type) {
        case KnobType::integer:
          logged.trial.settings.push_back(KnobSetting::integer(knobs_[k].name, std::strtoll(text.c_str(), nullptr, 10)));
          break;
        case KnobType::real:
          logged.trial.settings.push_back(KnobSetting::real(knobs_[k].name, std::strtod(text.c_str(), nullptr)));
          break;
        case KnobType::categorical:
          logged.trial.settings.push_back(KnobSetting::categorical(knobs_[k].name, text));
          break;
      }
    }
    const size_t tail = 1 + knobs_.size();
    bool ok = false;
    logged.outcome.state = parse_state(row[tail + 2], ok);
    if (!ok) continue;
    logged.outcome.value = std::strtod(row[tail].c_str(), nullptr);
    logged.outcome.reason = row[tail + 3];
    logged.seconds = std::strtod(row[tail + 4].c_str(), nullptr);
    trials.push_back(std::move(logged));
  }
  return trials;
}

std::optional<LoggedTrial> TrialLog::best() const {
  std::optional<LoggedTrial> best;
  for (auto& logged : read()) {
    if (logged.outcome.state != TrialOutcome::State::complete) continue;
    if (!best || objective_.better(logged.outcome.value, best->outcome.value)) best = std::move(logged);
  }
  return best;
}

std::optional<LoggedTrial> TrialLog::write_best_deck(const std::function<std::string(const Trial&)>& deck_text) const {
  auto best_trial = best();
  if (!best_trial) return std::nullopt;
  std::ostringstream text;
  text << "# strata tune: the best complete trial in " << csv_path_ << ": trial " << best_trial->trial.number << ", "
       << objective_.name << " = " << format_number(best_trial->outcome.value) << " ("
       << to_string(objective_.direction) << ")\n# knobs:";
  for (const auto& setting : best_trial->trial.settings) text << " " << setting.name << "=" << setting.text;
  text << "\n" << deck_text(best_trial->trial);
  // Write then rename, so that a reader never sees half a deck.
  const std::string path = best_deck_path();
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << text.str();
    if (!out) throw Error("cannot write " + temporary, "check the free space and permissions of output.dir");
  }
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) throw Error("cannot rename " + temporary + " to " + path + ": " + error.message(), "check output.dir");
  return best_trial;
}

}  // namespace strata
