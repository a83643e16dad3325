#include "comm/mpi_channel.hpp"

#include <sys/prctl.h>

#include <chrono>
#include <cstdlib>
#include <climits>
#include <string>
#include <thread>

#include "common/error.hpp"

namespace strata::comm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void prepare_process_for_polite_waits() {
  setenv("OMPI_MCA_mpi_yield_when_idle", "0", /*overwrite=*/1);
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

void Backoff::pause() {
  if (++polls_ < 4) return;
  std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  if (sleep_us_ < 200) sleep_us_ *= 2;
}

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw Error(std::string(call) + " failed: " + std::string(text, length),
              "a peer rank probably died; see the first error printed by mpirun");
}

double wait_politely(MPI_Request& request, MPI_Status* status) {
  auto start = std::chrono::steady_clock::now();
  Backoff backoff;
  int done = 0;
  while (true) {
    check_mpi(MPI_Test(&request, &done, status), "MPI_Test");
    if (done) break;
    backoff.pause();
  }
  return seconds_since(start);
}

void wait_all_politely(std::vector<MPI_Request>& requests) {
  for (auto& request : requests) {
    if (request != MPI_REQUEST_NULL) wait_politely(request);
  }
  requests.clear();
}

bool probe_politely(MPI_Comm comm, int source, int tag, MPI_Message& message, MPI_Status& status,
                    bool block) {
  Backoff backoff;
  while (true) {
    int found = 0;
    check_mpi(MPI_Improbe(source, tag, comm, &found, &message, &status), "MPI_Improbe");
    if (found) return true;
    if (!block) return false;
    backoff.pause();
  }
}

int receive_bytes(MPI_Comm comm, int source, int tag, std::vector<char>& buffer, double* waited_s) {
  auto start = std::chrono::steady_clock::now();
  MPI_Message message;
  MPI_Status status;
  probe_politely(comm, source, tag, message, status, true);
  if (waited_s) *waited_s = seconds_since(start);
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  buffer.resize(count);
  check_mpi(MPI_Mrecv(buffer.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE), "MPI_Mrecv");
  return status.MPI_SOURCE;
}

MPI_Request send_bytes(MPI_Comm comm, int dest, int tag, const std::vector<char>& buffer) {
  if (buffer.size() > static_cast<size_t>(INT_MAX)) {
    throw Error("message of " + std::to_string(buffer.size()) + " bytes exceeds MPI's 2 GiB count limit",
                "reduce train.batch_size or the number of tables per batch");
  }
  MPI_Request request;
  check_mpi(MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE, dest, tag, comm, &request),
            "MPI_Isend");
  return request;
}

}  // namespace strata::comm
