#include "comm/collectives.hpp"

#include <chrono>
#include <climits>
#include <cstring>
#include <string>

#include "comm/mpi_channel.hpp"
#include "common/error.hpp"

namespace strata::comm {

namespace {

// What is waited for (a collective names its communicator's other ranks) goes
// to the stall watchdog's report if the wait stalls.
double wait_for(MPI_Request& request, const char* what, MPI_Comm comm, const Service& service,
                const Pace& pace = {}) {
  const auto start = std::chrono::steady_clock::now();
  Backoff backoff(pace);
  while (true) {
    int done = 0;
    check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) break;
    if (comm == MPI_COMM_NULL) {
      note_waiting_on(request, what);  // a send names its destination
    } else {
      WaitRecord::note_request(what, comm);
    }
    if (service) service();
    backoff.pause();
  }
  StallWatchdog::progress();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double wait(MPI_Request& request, const Service& service, const Pace& pace) {
  return wait_for(request, "a request (a send, a receive or a collective) to complete", MPI_COMM_NULL, service, pace);
}

void allreduce(void* data, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, const Service& service,
               const Pace& pace) {
  MPI_Request request;
  check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, count, type, op, comm, &request), "MPI_Iallreduce");
  wait_for(request, "an all-reduce", comm, service, pace);
}

void ordered_allreduce_sum(float* data, int count, MPI_Comm comm, const Service& service) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  if (ranks == 1 || count == 0) return;
  // Block q (of near-equal sizes) is folded by rank q.
  std::vector<int> sizes(ranks), offsets(ranks);
  for (int q = 0, at = 0; q < ranks; ++q) {
    sizes[q] = count / ranks + (q < count % ranks ? 1 : 0);
    offsets[q] = at;
    at += sizes[q];
  }
  const int mine = sizes[rank];
  std::vector<int> receive_sizes(ranks, mine), receive_offsets(ranks);
  for (int r = 0; r < ranks; ++r) receive_offsets[r] = r * mine;
  std::vector<float> blocks(static_cast<size_t>(mine) * ranks);  // (ranks, mine): every rank's block `rank`
  MPI_Request request;
  check_mpi(MPI_Ialltoallv(data, sizes.data(), offsets.data(), MPI_FLOAT, blocks.data(), receive_sizes.data(),
                           receive_offsets.data(), MPI_FLOAT, comm, &request),
            "MPI_Ialltoallv");
  wait_for(request, "an ordered all-reduce (all-to-all)", comm, service);
  float* folded = data + offsets[rank];
  for (int i = 0; i < mine; ++i) folded[i] = blocks[size_t(i)];
  for (int r = 1; r < ranks; ++r) {
    const float* block = blocks.data() + size_t(r) * mine;
    for (int i = 0; i < mine; ++i) folded[i] += block[i];
  }
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, sizes.data(), offsets.data(), MPI_FLOAT, comm,
                            &request),
            "MPI_Iallgatherv");
  wait_for(request, "an ordered all-reduce (all-gather)", comm, service);
}

void reduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm) {
  MPI_Request request;
  check_mpi(MPI_Ireduce(send, recv, count, type, op, root, comm, &request), "MPI_Ireduce");
  wait_for(request, "a reduce", comm, {});
}

void barrier(MPI_Comm comm, const Pace& pace) {
  MPI_Request request;
  check_mpi(MPI_Ibarrier(comm, &request), "MPI_Ibarrier");
  wait_for(request, "a barrier", comm, {}, pace);
}

void broadcast(void* data, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  MPI_Request request;
  check_mpi(MPI_Ibcast(data, count, type, root, comm, &request), "MPI_Ibcast");
  wait_for(request, "a broadcast", comm, {});
}

int ranks_on_node(MPI_Comm comm) {
  // From every rank's processor name, gathered politely: a shared-memory
  // communicator (MPI_Comm_split_type) would cost a blocking context-id
  // agreement over comm for one number.
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  int ranks = 1;
  MPI_Comm_size(comm, &ranks);
  std::vector<char> names(size_t(ranks) * MPI_MAX_PROCESSOR_NAME);
  MPI_Request request;
  check_mpi(MPI_Iallgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm,
                           &request),
            "MPI_Iallgather");
  wait_for(request, "an all-gather of processor names", comm, {});
  int same = 0;
  for (int r = 0; r < ranks; ++r) {
    same += std::strncmp(names.data() + size_t(r) * MPI_MAX_PROCESSOR_NAME, name, MPI_MAX_PROCESSOR_NAME) == 0;
  }
  return same;
}

void allgather_bytes(const void* send, int bytes, void* receive, MPI_Comm comm) {
  MPI_Request request;
  check_mpi(MPI_Iallgather(send, bytes, MPI_BYTE, receive, bytes, MPI_BYTE, comm, &request), "MPI_Iallgather");
  wait_for(request, "an all-gather", comm, {});
}

std::vector<char> gather_bytes(const void* send, int bytes, int root, MPI_Comm comm, const Pace& pace) {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &ranks);
  std::vector<int> counts(rank == root ? ranks : 0), offsets(rank == root ? ranks : 0);
  MPI_Request request;
  check_mpi(MPI_Igather(&bytes, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm, &request), "MPI_Igather");
  wait_for(request, "a gather", comm, {}, pace);
  std::vector<char> all;
  if (rank == root) {
    long long at = 0;
    for (int r = 0; r < ranks; ++r) offsets[r] = static_cast<int>(at), at += counts[r];
    all.resize(static_cast<size_t>(total_bytes(counts, "gather")));
  }
  check_mpi(MPI_Igatherv(send, bytes, MPI_BYTE, all.data(), counts.data(), offsets.data(), MPI_BYTE, root, comm,
                         &request),
            "MPI_Igatherv");
  wait_for(request, "a gather", comm, {}, pace);
  return all;
}

int total_bytes(const std::vector<int>& counts, const char* what) {
  long long total = 0;
  for (int c : counts) total += c;
  if (total > INT_MAX) {
    throw Error(std::string(what) + ": " + std::to_string(total) + " bytes in one exchange exceed MPI's 2 GiB limit",
                "lower train.batch_size (or the number of tables)");
  }
  return static_cast<int>(total);
}

void alltoallv(const void* send, const std::vector<int>& send_bytes, void* receive,
               const std::vector<int>& receive_bytes, MPI_Comm comm, const Service& service) {
  thread_local std::vector<int> send_offsets, receive_offsets;
  const size_t ranks = send_bytes.size();
  send_offsets.resize(ranks);
  receive_offsets.resize(ranks);
  long long at_send = 0, at_receive = 0;
  for (size_t r = 0; r < ranks; ++r) {
    send_offsets[r] = static_cast<int>(at_send), receive_offsets[r] = static_cast<int>(at_receive);
    at_send += send_bytes[r], at_receive += receive_bytes[r];
  }
  total_bytes(send_bytes, "all-to-all send");
  total_bytes(receive_bytes, "all-to-all receive");
  MPI_Request request;
  check_mpi(MPI_Ialltoallv(send, send_bytes.data(), send_offsets.data(), MPI_BYTE, receive, receive_bytes.data(),
                           receive_offsets.data(), MPI_BYTE, comm, &request),
            "MPI_Ialltoallv");
  wait_for(request, "an all-to-all", comm, service);
}

void alltoallv_sized_here(const std::vector<char>& send, const std::vector<int>& send_bytes,
                          std::vector<char>& receive, std::vector<int>& receive_bytes, MPI_Comm comm,
                          const Service& service) {
  receive_bytes.assign(send_bytes.size(), 0);
  MPI_Request request;
  check_mpi(MPI_Ialltoall(send_bytes.data(), 1, MPI_INT, receive_bytes.data(), 1, MPI_INT, comm, &request),
            "MPI_Ialltoall");
  wait_for(request, "an all-to-all", comm, service);
  receive.resize(static_cast<size_t>(total_bytes(receive_bytes, "all-to-all receive")));
  alltoallv(send.data(), send_bytes, receive.data(), receive_bytes, comm, service);
}

}  // namespace strata::comm
