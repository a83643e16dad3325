// The trainer's metrics windows: every metrics_every steps the trainers
// combine their counters and trainer 0 prints progress and appends a line to
// metrics.jsonl (loss, throughput, bytes per link, cache levels, expert routing,
// controller notes).
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "comm/collectives.hpp"
#include "runtime/trainer.hpp"

namespace strata::runtime {
namespace {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int total = static_cast<int>(s + 0.5);
  char text[32];
  std::snprintf(text, sizeof(text), "%d:%02d:%02d", total / 3600, (total / 60) % 60, total % 60);
  return text;
}

}  // namespace

nlohmann::json routing_json(const model::RoutingStats& stats) {
  double routed = 0, accepted = 0, most = 0;
  for (size_t e = 0; e < stats.routed.size(); ++e) {
    routed += stats.routed[e], accepted += stats.accepted[e];
    most = std::max(most, stats.routed[e]);
  }
  const double mean = stats.routed.empty() ? 0.0 : routed / double(stats.routed.size());
  return {{"routed", stats.routed},
          {"accepted", stats.accepted},
          {"drop_fraction", routed > 0 ? 1.0 - accepted / routed : 0.0},
          {"max_mean_load", mean > 0 ? most / mean : 0.0},
          {"balance_loss", stats.steps > 0 ? stats.balance_loss / stats.steps : 0.0}};
}

void Trainer::flush_window(int64_t planned, bool last) {
  const auto& traffic = store_->traffic();
  const double local[8] = {window_loss_,
                           double(window_samples_),
                           double(traffic.rows_pulled),
                           double(traffic.bytes_pulled),
                           double(traffic.bytes_pushed),
                           double(report_.bytes_batches),
                           report_.stall_s,
                           traffic.pull_wait_s};
  double total[8];
  comm::reduce(local, total, 8, MPI_DOUBLE, MPI_SUM, 0, comm_);
  const auto levels = store_->level_stats();
  std::vector<double> level_local, level_total(levels.size());
  for (const auto& [name, value] : levels) level_local.push_back(value);
  if (!levels.empty()) {
    comm::reduce(level_local.data(), level_total.data(), static_cast<int>(levels.size()), MPI_DOUBLE, MPI_SUM, 0,
                 comm_);
  }
  // Expert routing: every trainer counts its own batches, so the sums do not depend on the layout.
  model::RoutingStats routing = model_->take_routing_stats();
  if (!routing.routed.empty()) {
    std::vector<double> packed(routing.routed);
    packed.insert(packed.end(), routing.accepted.begin(), routing.accepted.end());
    packed.push_back(routing.balance_loss);
    packed.push_back(routing.steps);
    std::vector<double> summed(packed.size());
    comm::reduce(packed.data(), summed.data(), static_cast<int>(packed.size()), MPI_DOUBLE, MPI_SUM, 0, comm_);
    const size_t experts = routing.routed.size();
    routing.routed.assign(summed.begin(), summed.begin() + experts);
    routing.accepted.assign(summed.begin() + experts, summed.begin() + 2 * experts);
    routing.balance_loss = summed[2 * experts];
    routing.steps = summed[2 * experts + 1];
    if (is_root()) {
      model::RoutingStats& run = report_.routing;
      run.routed.resize(experts, 0.0);
      run.accepted.resize(experts, 0.0);
      for (size_t e = 0; e < experts; ++e) run.routed[e] += routing.routed[e], run.accepted[e] += routing.accepted[e];
      run.balance_loss += routing.balance_loss;
      run.steps += routing.steps;
    }
  }
  for (auto& note : gather_notes()) pending_notes_.push_back(std::move(note));
  const auto now = Clock::now();
  const double window_s = seconds(window_start_, now);
  if (is_root() && total[1] > 0) {
    last_window_loss_ = total[0] / total[1];
    const double rate = total[1] / std::max(window_s, 1e-9);
    const double elapsed = seconds(run_start_, now);
    if (last || report_.steps % options_.output.progress_every == 0) {
      std::string eta = "?";
      if (planned > 0 && report_.steps > 0) eta = format_duration(elapsed / report_.steps * (planned - report_.steps));
      spdlog::info("step {}{} | {:.0f} samples/s | loss {:.4f} | ETA {}", report_.steps,
                   planned > 0 ? "/" + std::to_string(planned) : std::string(), rate, last_window_loss_, eta);
    }
    nlohmann::json line = {
        {"step", report_.steps},
        {"epoch", epoch_},
        {"time_s", elapsed},
        {"samples_per_s", rate},
        {"loss", last_window_loss_},
        {"rows_pulled", total[2]},
        {"bytes", {{"server_to_trainer", total[3]}, {"trainer_to_server", total[4]}, {"producer_to_trainer", total[5]}}},
        {"stall_s", total[6]},
        {"pull_wait_s", total[7]},
    };
    if (!routing.routed.empty()) line["experts"] = routing_json(routing);
    if (!levels.empty()) {
      nlohmann::json level_json;
      for (size_t i = 0; i < levels.size(); ++i) level_json[levels[i].first] = level_total[i];
      auto hit_rate = [](double h, double m) { return h + m > 0 ? h / (h + m) : 0.0; };
      // Window hit rates: the change since the previous line.
      const double l1h = level_json["l1_hits"], l1m = level_json["l1_misses"];
      const double l2h = level_json["l2_hits"], l2m = level_json["l2_misses"];
      level_json["l1_hit_rate_window"] = hit_rate(l1h - last_levels_[0], l1m - last_levels_[1]);
      level_json["l2_hit_rate_window"] = hit_rate(l2h - last_levels_[2], l2m - last_levels_[3]);
      last_levels_ = {l1h, l1m, l2h, l2m};
      line["levels"] = level_json;
    }
    if (last || report_.steps % options_.output.metrics_every == 0) {
      if (!pending_notes_.empty()) line["autotune"] = std::move(pending_notes_);
      pending_notes_.clear();
      writer_->append(line);
    }
  }
  window_loss_ = 0;
  window_samples_ = 0;
  window_steps_ = 0;
  window_start_ = now;
}

// Collective over trainers: the controller decisions every trainer heard, on trainer 0.
std::vector<std::string> Trainer::gather_notes() {
  std::string mine;
  for (const auto& n : store_->take_notes()) mine += n + "\n";
  const std::vector<char> all = comm::gather_bytes(mine.data(), static_cast<int>(mine.size()), 0, comm_);
  std::vector<std::string> notes;
  const std::string text(all.begin(), all.end());
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    notes.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  return notes;
}

}  // namespace strata::runtime
