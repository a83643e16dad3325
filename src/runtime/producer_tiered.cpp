// Scheme B rounds on the producer: rounds are built `horizon` ahead of the
// prefetch window, their requests exchanged and planned, and each staged as it
// leaves the front; the graceful fallback to Scheme A.
#include "runtime/producer.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <thread>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"
#include "runtime/batch_channel.hpp"

namespace strata::runtime {

// Scheme B: rounds are built `horizon` ahead of the window so the look-ahead
// policy knows future uses; each round is planned and staged when it leaves
// the front, and its staging plan travels with the batch of that round.
void Producer::stream_tiered_rounds() {
  std::deque<Round> window;
  bool more = true;
  while (true) {
    // The online controller may change the depth between rounds.
    depth_ = staging_->prefetch_depth();
    const size_t ahead = static_cast<size_t>(depth_ + options_.store.horizon);
    bool built = false;
    while (more && window.size() <= ahead) {
      // Never plan rounds past the last step: the window near the end (and
      // with it the minimum L1 budget) must not depend on when the trainers'
      // end-of-training message arrives.
      if (options_.train.steps > 0 && next_round_ >= options_.train.steps) {
        more = false;
        break;
      }
      Round round;
      round.number = next_round_;
      round.batches.resize(queues_.size());
      bool ok = true;
      for (size_t i = 0; i < queues_.size() && ok; ++i) ok = build(queues_[i], round.batches[i]);
      poll_done();
      ok = ok && !any_done();
      bool any_lagging = false;
      comm::WaitingFor waiting([] { return std::string("the other producers' requests of the round"); });
      if (!exchange_->exchange(ok, staging_->wants_fallback(), round.batches, requests_, any_lagging,
                               [this] { service(); })) {
        more = false;
        break;
      }
      window.push_back(std::move(round));
      ++next_round_;
      built = true;
      if (any_lagging) {
        switch_to_ps(window);
        return;
      }
      staging_->add_round(window.back().number, requests_);
    }
    if (window.empty()) break;
    // The last rounds are built already (the horizon reaches the last step):
    // the producers agree on the fallback without a round exchange to carry it.
    if (!built && options_.store.fallback_late_rounds > 0 && any_producer_lagging(staging_->wants_fallback())) {
      switch_to_ps(window);
      return;
    }
    Round& front = window.front();
    comm::StallWatchdog::set_step("step", front.number + 1);
    if (options_.store.fault_staging_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.store.fault_staging_delay_ms));
    }
    staging_->note_lateness();
    const std::string decision = staging_->run_controller(front.number);
    if (!decision.empty()) spdlog::info("autotune: {}", decision);
    const std::string pool = staging_->run_l2_pool(front.number, uint64_t(report_.samples));
    if (!pool.empty()) spdlog::debug("l2 pool: {}", pool);
    for (size_t i = 0; i < queues_.size(); ++i) {
      std::vector<char> message = take_buffer(queues_[i]);
      encode_batch_message(front.batches[i], message);
      {
        comm::WaitingFor waiting([this, i] {
          return "the rows to stage for " + comm::StallWatchdog::name_rank(queues_[i].world_rank) +
                 " (write-backs from its trainers, rows from the servers)";
        });
        staging_->stage(front.number, i, message);
      }
      send(queues_[i], std::move(message));
    }
    window.pop_front();
    poll_done();
  }
}

// Graceful fallback to Scheme A (store.fallback_late_rounds): staging kept
// its trainers waiting, so from the window's front round on, rows come from
// the servers. The front batch carries the switch; the trainers flush their
// L1s, this producer writes its L2 down, and every later batch goes out plain.
// Every producer decides at the same round (the flag travels in exchange_round).
void Producer::switch_to_ps(std::deque<Round>& window) {
  const Round& front = window.front();
  if (context_.index == 0) {
    spdlog::warn("tiered store: staging was late for {} rounds in a row; falling back to Scheme A (ps) from "
                 "step {} (store.fallback_late_rounds)",
                 options_.store.fallback_late_rounds, front.number);
  }
  for (size_t i = 0; i < queues_.size(); ++i) {
    std::vector<char> message = take_buffer(queues_[i]);
    encode_batch_message(front.batches[i], message);
    staging_->append_switch(front.number, message);
    send(queues_[i], std::move(message));
  }
  fallback_round_ = front.number;
  fell_back_ = true;
  staging_->finish_training();  // every L1 and this L2 written down to the servers
  for (size_t r = 1; r < window.size(); ++r) {
    for (size_t i = 0; i < queues_.size(); ++i) send_batch(queues_[i], window[r].batches[i]);
  }
  window.clear();
}

// Collective over producers: does any of them want the Scheme A fallback?
bool Producer::any_producer_lagging(bool lagging) {
  int any = lagging ? 1 : 0;
  comm::allreduce(&any, 1, MPI_INT, MPI_MAX, context_.role_comm, [this] { service(); });
  return any != 0;
}

}  // namespace strata::runtime
