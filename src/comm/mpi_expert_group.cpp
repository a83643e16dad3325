#include "comm/mpi_expert_group.hpp"

#include <climits>
#include <string>

#include "comm/collectives.hpp"
#include "comm/mpi_channel.hpp"
#include "comm/stall_watchdog.hpp"
#include "common/error.hpp"

namespace strata::comm {

namespace {
constexpr int kTagExpertChain = 300;  // trainer -> the next replica of its experts: folded expert gradients

int checked_count(size_t n) {
  if (n > size_t(INT_MAX)) {
    throw Error("expert gradients of " + std::to_string(n) + " floats exceed one MPI message",
                "use fewer or narrower experts per trainer (model.num_experts / layout.ep, model.top_mlp)");
  }
  return static_cast<int>(n);
}
}  // namespace

void MpiExpertGroup::exchange(const std::vector<char>& send, const std::vector<int>& send_bytes,
                              std::vector<char>& receive, std::vector<int>& receive_bytes) {
  WaitingFor waiting([] { return std::string("the expert all-to-all of its group"); });
  alltoallv_sized_here(send, send_bytes, receive, receive_bytes, groups_.ep_comm());
  for (size_t m = 0; m < send_bytes.size(); ++m) {
    if (int(m) != rank()) bytes_exchanged_ += uint64_t(send_bytes[m]);
  }
}

void MpiExpertGroup::receive_from_previous_replica(float* data, size_t n) {
  WaitingFor waiting([] { return std::string("the expert gradients of the previous replica"); });
  MPI_Request request;
  check_mpi(MPI_Irecv(data, checked_count(n), MPI_FLOAT, replica() - 1, kTagExpertChain, groups_.dp_comm(), &request),
            "MPI_Irecv");
  wait(request);
}

void MpiExpertGroup::send_to_next_replica(const float* data, size_t n) {
  WaitingFor waiting([] { return std::string("the next replica to take its expert gradients"); });
  MPI_Request request;
  check_mpi(MPI_Isend(data, checked_count(n), MPI_FLOAT, replica() + 1, kTagExpertChain, groups_.dp_comm(), &request),
            "MPI_Isend");
  wait(request);
  bytes_chained_ += n * sizeof(float);
}

}  // namespace strata::comm
