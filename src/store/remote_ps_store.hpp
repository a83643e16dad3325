// RemotePsStore: Scheme A. Every step the trainer pulls every unique row of its
// batch from the server shards that own them and pushes its row gradients back.
#pragma once

#include <mpi.h>

#include <vector>

#include "store/parameter_store.hpp"
#include "store/server_protocol.hpp"

namespace strata::store {

class RemotePsStore : public ParameterStore {
 public:
  // server_ranks: world ranks of the servers, in server-index order.
  RemotePsStore(MPI_Comm world, std::vector<int> server_ranks, int trainer_index, int dim, int num_tables);
  ~RemotePsStore() override;

  const char* mode() const override { return "ps"; }
  void pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) override;
  void push(const data::Batch& batch, const std::vector<std::vector<float>>& grads) override;
  RowDump dump_rows() override;
  void checkpoint_servers(const void* stamp, size_t bytes) override;
  void shutdown() override;

 private:
  struct ServerRequest {
    std::vector<uint32_t> counts;   // (num_tables) keys per table
    std::vector<uint64_t> keys;     // keys in table order
    std::vector<uint32_t> tables;   // (n) table of each key
    std::vector<uint32_t> unique_index;  // (n) position in batch.tables[t].unique_keys
    std::vector<char> send_buffer;
    std::vector<char> reply_buffer;
  };
  void send_header_only(ServerOp op, const void* payload = nullptr, size_t bytes = 0);
  void finish_pending_sends();

  MPI_Comm world_;
  std::vector<int> server_ranks_;
  int trainer_index_;
  int dim_;
  int num_tables_;
  int64_t step_ = 0;
  std::vector<ServerRequest> requests_;   // (servers)
  std::vector<MPI_Request> pending_sends_;
};

}  // namespace strata::store
