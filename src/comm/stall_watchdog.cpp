#include "comm/stall_watchdog.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "comm/mpi_channel.hpp"
#include "common/stall_error.hpp"

namespace strata::comm {
namespace {

// A gap this long between two checks means this thread was not waiting (it
// computed, wrote a checkpoint, or the process was stopped): the clock
// restarts, so only time spent waiting can add up to a stall. Backoff sleeps
// at most 200 us between polls.
constexpr auto kNotWaitingGap = std::chrono::seconds(1);
// Trainer 0 sends heartbeats at most this often (or a quarter of the timeout).
constexpr auto kHeartbeatEvery = std::chrono::seconds(1);

struct Watchdog {
  std::atomic<bool> armed{false};
  WaitClock::duration timeout{};
  StallWatchdogOptions options;
  std::atomic<WaitClock::rep> last_progress{0};  // WaitClock ticks
  WaitClock::time_point last_check{};
  const char* step_unit = nullptr;
  int64_t step = 0;
  WaitClock::time_point last_heartbeat{};
};

const int kHeartbeat = 1;  // the payload: sends of it are never waited for

Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

thread_local WaitRecord* innermost_wait = nullptr;
thread_local const WaitingFor* innermost_waiting_for = nullptr;

const char* tag_name(int tag) {
  switch (tag) {
    case kTagBatch: return "a batch";
    case kTagProducerCtl: return "an end-of-phase message";
    case kTagWriteBack: return "a write-back of L1 rows";
    case kTagFlushDone: return "a flush-done message";
    case kTagCheckpoint: return "a checkpoint stamp";
    case kTagCheckpointReady: return "a checkpoint-ready message";
    case kTagProgress: return "a heartbeat";
    case kTagProducerRequest: return "a producer's row request";
    case kTagProducerReply: return "rows for a producer";
    case kTagServerRequest: return "a trainer's server request";
    case kTagServerReply: return "rows for a trainer";
    default: return "a message";
  }
}

// A rank of `comm` as the job's communicator numbers it (what name_rank expects).
int world_rank_of(MPI_Comm comm, int rank) {
  const MPI_Comm job = watchdog().options.comm;
  if (comm == job || comm == MPI_COMM_NULL) return rank;
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(job, &world);
  int translated = MPI_UNDEFINED;
  MPI_Group_translate_ranks(group, 1, &rank, world, &translated);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return translated == MPI_UNDEFINED ? rank : translated;
}

// The other ranks of a collective's communicator, by name.
std::string peers_of(MPI_Comm comm) {
  int me = 0, size = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &size);
  std::string peers;
  for (int r = 0; r < size; ++r) {
    if (r == me) continue;
    peers += (peers.empty() ? "" : ", ") + StallWatchdog::name_rank(world_rank_of(comm, r));
  }
  return peers.empty() ? "no other rank" : peers;
}

WaitClock::duration heartbeat_interval(WaitClock::duration timeout) {
  return std::min<WaitClock::duration>(timeout / 4, kHeartbeatEvery);
}

WaitClock::rep ticks(WaitClock::time_point t) { return t.time_since_epoch().count(); }
WaitClock::time_point from_ticks(WaitClock::rep r) { return WaitClock::time_point(WaitClock::duration(r)); }

// Heartbeats that have arrived are progress. A heartbeat says that a step
// completed and that, while steps go on, the next one comes within the
// heartbeat interval: the clock of a rank that hears of progress only from
// heartbeats restarts at the latest time of that next one, so that it never
// reaches its timeout before the ranks that wait for the stalled one directly
// (their reports are the telling ones).
void receive_heartbeats() {
  while (true) {
    int found = 0;
    MPI_Message message;
    MPI_Status status;
    check_mpi(MPI_Improbe(MPI_ANY_SOURCE, kTagProgress, watchdog().options.comm, &found, &message, &status),
              "MPI_Improbe");
    if (!found) return;
    int payload = 0;
    check_mpi(MPI_Mrecv(&payload, 1, MPI_INT, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
    Watchdog& w = watchdog();
    const auto latest_next = WaitClock::now() + heartbeat_interval(w.timeout);
    w.last_progress.store(std::max(w.last_progress.load(std::memory_order_relaxed), ticks(latest_next)),
                          std::memory_order_relaxed);
  }
}

}  // namespace

void StallWatchdog::arm(StallWatchdogOptions options) {
  Watchdog& w = watchdog();
  if (!(options.timeout_s > 0)) {
    disarm();
    return;
  }
  w.timeout = std::chrono::duration_cast<WaitClock::duration>(std::chrono::duration<double>(options.timeout_s));
  w.options = std::move(options);
  w.step_unit = nullptr;
  w.last_check = WaitClock::now();
  w.last_heartbeat = w.last_check;
  w.last_progress = ticks(w.last_check);
  w.armed = true;
}

void StallWatchdog::disarm() {
  Watchdog& w = watchdog();
  if (!w.armed) return;
  w.armed = false;
  receive_heartbeats();  // those already here (later ones meet the next job's watchdog, or none)
}
bool StallWatchdog::armed() { return watchdog().armed.load(std::memory_order_relaxed); }
double StallWatchdog::timeout_s() { return std::chrono::duration<double>(watchdog().timeout).count(); }

void StallWatchdog::progress() {
  if (!armed()) return;
  watchdog().last_progress.store(ticks(WaitClock::now()), std::memory_order_relaxed);
}

void StallWatchdog::step_completed() {
  if (!armed()) return;
  Watchdog& w = watchdog();
  const auto now = WaitClock::now();
  w.last_progress.store(ticks(now), std::memory_order_relaxed);
  if (w.options.heartbeat_to.empty() || now - w.last_heartbeat < heartbeat_interval(w.timeout)) return;
  w.last_heartbeat = now;
  for (int rank : w.options.heartbeat_to) {
    MPI_Request request;
    check_mpi(MPI_Isend(&kHeartbeat, 1, MPI_INT, rank, kTagProgress, w.options.comm, &request), "MPI_Isend");
    check_mpi(MPI_Request_free(&request), "MPI_Request_free");
  }
}

void StallWatchdog::set_step(const char* unit, int64_t number) {
  Watchdog& w = watchdog();
  w.step_unit = unit;
  w.step = number;
}

std::string StallWatchdog::name_rank(int world_rank) {
  if (world_rank == MPI_ANY_SOURCE) return "any rank";
  const Watchdog& w = watchdog();
  if (w.options.name_rank) return w.options.name_rank(world_rank);
  return "rank " + std::to_string(world_rank);
}

WaitingFor::WaitingFor(std::function<std::string()> describe)
    : describe_(std::move(describe)), outer_(innermost_waiting_for) {
  innermost_waiting_for = this;
}

WaitingFor::~WaitingFor() { innermost_waiting_for = outer_; }

WaitRecord::WaitRecord() : outer_(innermost_wait) {
  if (StallWatchdog::armed()) start_ = WaitClock::now();
  innermost_wait = this;
}

WaitRecord::~WaitRecord() { innermost_wait = outer_; }

void WaitRecord::note(const Target& target) {
  for (int i = 0; i < noted_; ++i) {
    const Target& t = targets_[i];
    if (t.what == target.what && t.comm == target.comm && t.source == target.source && t.tag == target.tag &&
        t.send == target.send) {
      return;
    }
  }
  if (noted_ < kTargets) targets_[noted_++] = target;
}

void WaitRecord::note_message(MPI_Comm comm, int source, int tag) {
  if (innermost_wait == nullptr || !StallWatchdog::armed()) return;
  innermost_wait->note(Target{nullptr, comm, source, tag, false});
}

void WaitRecord::note_send(MPI_Comm comm, int dest, int tag) {
  if (innermost_wait == nullptr || !StallWatchdog::armed()) return;
  innermost_wait->note(Target{nullptr, comm, dest, tag, true});
}

void WaitRecord::note_request(const char* what, MPI_Comm comm) {
  if (innermost_wait == nullptr || !StallWatchdog::armed()) return;
  innermost_wait->note(Target{what, comm, 0, 0, false});
}

void WaitRecord::check() {
  if (!StallWatchdog::armed()) return;
  Watchdog& w = watchdog();
  const auto now = WaitClock::now();
  if (start_ == WaitClock::time_point{}) start_ = now;  // armed during this wait
  if (now - w.last_check > kNotWaitingGap) {
    w.last_progress.store(std::max(w.last_progress.load(std::memory_order_relaxed), ticks(now)),
                          std::memory_order_relaxed);
  }
  w.last_check = now;
  receive_heartbeats();
  if (noted_ > 0) {
    for (int i = 0; i < noted_; ++i) reported_[i] = targets_[i];
    reported_count_ = noted_;
    noted_ = 0;
  }
  const auto since = now - std::max(start_, from_ticks(w.last_progress.load(std::memory_order_relaxed)));
  if (since < w.timeout) return;
  const double waited_s = std::chrono::duration<double>(since).count();
  throw StallError(describe(waited_s), w.options.fix, waited_s);
}

std::string WaitRecord::describe(double waited_s) const {
  const Watchdog& w = watchdog();
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", waited_s);
  std::string polled;
  for (int i = 0; i < reported_count_; ++i) {
    const Target& t = reported_[i];
    std::string one;
    if (t.what != nullptr) {
      one = t.what;
      if (t.comm != MPI_COMM_NULL) one += " with " + peers_of(t.comm);
    } else {
      const int peer = t.source == MPI_ANY_SOURCE ? MPI_ANY_SOURCE : world_rank_of(t.comm, t.source);
      one = (t.send ? "the send of " : "") + std::string(tag_name(t.tag)) + " (tag " + std::to_string(t.tag) + ")" +
            (t.send ? " to " : " from ") + StallWatchdog::name_rank(peer);
    }
    polled += (polled.empty() ? "" : "; ") + one;
  }
  std::string text = (w.options.self.empty() ? std::string("this rank") : w.options.self) + " waited " + seconds +
                     " s without progress";
  if (innermost_waiting_for != nullptr) {
    text += " for " + innermost_waiting_for->describe();
    if (!polled.empty()) text += " (polling for " + polled + ")";
  } else if (!polled.empty()) {
    text += " for " + polled;
  }
  if (w.step_unit != nullptr) text += ", in " + std::string(w.step_unit) + " " + std::to_string(w.step);
  return text;
}

}  // namespace strata::comm
