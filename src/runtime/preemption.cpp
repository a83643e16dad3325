#include "runtime/preemption.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"

namespace strata::runtime {
namespace {

volatile std::sig_atomic_t requested_signal = 0;

// Async-signal-safe (fstat, fcntl). Only pipes and sockets: a terminal's or a
// file's open file description may be shared with the shell that started us.
void make_nonblocking_if_pipe(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return;
  const int flags = fcntl(fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) == 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

extern "C" void on_preemption_signal(int signal) {
  const int saved_errno = errno;
  if (signal == SIGINT && requested_signal != 0) {  // a second Ctrl-C: stop now
    std::signal(SIGINT, SIG_DFL);
    raise(SIGINT);
  }
  requested_signal = signal;
  // A launcher that is shutting down may stop reading our output: from now on
  // a log line that does not fit in the pipe is dropped instead of blocking
  // the checkpoint (a write blocked right now restarts and sees the flag).
  make_nonblocking_if_pipe(STDOUT_FILENO);
  make_nonblocking_if_pipe(STDERR_FILENO);
  errno = saved_errno;
}

std::string rank_name(const RoleLayout& layout, int world_rank) {
  const std::string rank = "rank " + std::to_string(world_rank);
  if (world_rank < 0 || world_rank >= layout.world_size()) return rank;
  return std::string(role_name(layout.role_of(world_rank))) + " " + std::to_string(layout.index_of(world_rank)) +
         " (" + rank + ")";
}

}  // namespace

void install_preemption_handlers() {
  struct sigaction action {};
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

bool preemption_requested() { return requested_signal != 0; }
int preemption_signal() { return requested_signal; }

void stop_blocking_on_log_output() {
  make_nonblocking_if_pipe(STDOUT_FILENO);
  make_nonblocking_if_pipe(STDERR_FILENO);
}

void start_stall_watchdog(const RunOptions& options, const RankContext& context) {
  if (!(options.runtime.stall_timeout_s > 0)) return;
  // Every rank has finished its start (a resume may read for long): only then
  // does waiting for a peer mean that the peer is stuck.
  comm::barrier(context.job);
  comm::StallWatchdogOptions watch;
  watch.timeout_s = options.runtime.stall_timeout_s;
  watch.comm = context.job;
  // A co-trained model's ranks are numbered within its own job: name the model too.
  const std::string model = options.model_name.empty() ? std::string() : "model " + options.model_name + "'s ";
  watch.self = model + rank_name(context.layout, context.world_rank);
  watch.name_rank = [layout = context.layout, model](int world_rank) { return model + rank_name(layout, world_rank); };
  watch.fix =
      "the rank the others wait for is stopped (SIGSTOP), hung (a file system read, a dead GPU) or dead; each "
      "rank's line names what it waited for. If a step or a phase of this job can take that long, raise "
      "runtime.stall_timeout_s (0 = off)";
  if (context.role == Role::kTrainer && context.index == 0) {
    // Servers may idle while the trainers' caches hold every row they need.
    for (int r = 0; r < context.layout.world_size(); ++r) {
      if (context.layout.role_of(r) != Role::kTrainer) watch.heartbeat_to.push_back(r);
    }
  }
  comm::StallWatchdog::arm(std::move(watch));
}

void stop_stall_watchdog() { comm::StallWatchdog::disarm(); }

void exit_stalled(const StallError& error, int world_rank) {
  const double timeout_s = comm::StallWatchdog::timeout_s();
  comm::StallWatchdog::disarm();
  stop_blocking_on_log_output();  // nothing may keep this rank from exiting
  if (auto logger = spdlog::default_logger()) logger->flush();
  std::fprintf(stderr, "strata: stalled: %s (runtime.stall_timeout_s = %g); exit code %d\n",
               error.what_failed().c_str(), timeout_s, kExitStalled);
  if (world_rank == 0 && !error.how_to_fix().empty()) std::fprintf(stderr, "  fix: %s\n", error.how_to_fix().c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  // The other ranks reach their own timeouts within about a second (the
  // heartbeat interval): time for them to report too before mpirun ends the
  // job on this rank's exit (it first wakes a stopped rank, which may revive
  // the others).
  std::this_thread::sleep_for(std::chrono::duration<double>(std::min(2.0, timeout_s / 2)));
  std::_Exit(kExitStalled);
}

void exit_failed(int exit_code, const std::string& message, int world_rank) {
  comm::StallWatchdog::disarm();
  stop_blocking_on_log_output();
  if (auto logger = spdlog::default_logger()) logger->flush();
  // Peers that failed at the same moment announce too; one of them speaks.
  const comm::JobFailure job = comm::announce_job_failure(exit_code, 0.3);
  if (job.speaker_rank == world_rank) {
    std::fprintf(stderr, "strata: error on rank %d: %s\n", world_rank, message.c_str());
  }
  std::fflush(stderr);
  std::fflush(stdout);
  std::_Exit(job.exit_code);
}

void exit_after_peer_failure(int exit_code) {
  comm::StallWatchdog::disarm();
  stop_blocking_on_log_output();
  if (auto logger = spdlog::default_logger()) logger->flush();
  std::fflush(stderr);
  std::fflush(stdout);
  // The failed rank exits first, after its message (mpirun reports the first
  // exit and ends the others): this one leaves later, with the same code.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::_Exit(exit_code);
}

}  // namespace strata::runtime
