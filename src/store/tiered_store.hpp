// TieredStore: Scheme B on the trainer side. Every row belongs to one trainer
// (owner_of) and is resident in that owner's L1 when a batch needs it: the
// producers stage it there ahead of time, and the staging plan tells each
// owner which of its slots every trainer's rows sit in. A step therefore
// exchanges only row values and row gradients between trainers (one
// all-to-all each, none with one trainer); owners sum gradients in rank order
// and update their rows in L1. Evaluation and the final dump read the servers
// after flush() has written every dirty row down to L3.
#pragma once

#include <mpi.h>

#include <deque>
#include <memory>
#include <vector>

#include "store/l1_device_tier.hpp"
#include "store/parameter_store.hpp"
#include "store/remote_ps_store.hpp"
#include "store/tiered_protocol.hpp"

namespace strata::store {

struct TieredCounters {
  uint64_t l1_hits = 0, l1_misses = 0, l1_evictions = 0, l1_write_backs = 0;
  uint64_t bytes_staged = 0;      // L2 -> L1 (host to device)
  uint64_t bytes_written_back = 0;  // L1 -> L2
  uint64_t bytes_all_to_all = 0;    // trainer <-> trainer rows and gradients
};

class TieredStore : public ParameterStore {
 public:
  // reports_producer: this trainer is the first one its producer feeds, so its
  // metrics carry that producer's counters (once per producer).
  TieredStore(MPI_Comm world, MPI_Comm trainers, int producer_rank, std::vector<int> server_ranks,
              int trainer_index, int dim, int num_tables, int64_t l1_rows,
              std::unique_ptr<model::SparseOptimizer> optimizer, bool reports_producer);

  const char* mode() const override { return "tiered"; }
  void stage(const char* staging, size_t bytes, double batch_wait_s) override;
  void pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) override;
  void push(const data::Batch& batch, const std::vector<std::vector<float>>& grads) override;
  void flush() override;
  void prepare_checkpoint(int64_t step) override;
  void checkpoint_servers(const void* stamp, size_t bytes) override { servers_.checkpoint_servers(stamp, bytes); }
  RowDump dump_rows() override;
  void shutdown() override;

  std::vector<std::pair<const char*, double>> level_stats() const override;
  std::vector<std::string> take_notes() override { return std::move(notes_); }

  const TieredCounters& counters() const { return counters_; }
  const L1DeviceTier& l1() const { return l1_; }

 private:
  // Sends every dirty L1 row to the producer in parts, the last one of kind last_kind.
  void write_down(WriteBackKind last_kind, int64_t round);
  void send_write_back(std::vector<char>&& buffer);
  // Rows this trainer asks each owner for, in request order (tables, then unique keys).
  void build_requests(const data::Batch& batch);
  size_t served_rows(int requester) const;

  MPI_Comm world_;
  MPI_Comm trainers_comm_;
  int producer_rank_;
  int trainer_index_;
  int trainers_;
  int dim_;
  int num_tables_;
  L1DeviceTier l1_;
  RemotePsStore servers_;  // evaluation and dump, after flush()
  bool flushed_ = false;
  bool fell_back_ = false;  // switched to Scheme A (store.fallback_late_rounds): rows live on the servers
  TieredCounters counters_;
  bool reports_producer_ = false;            // first trainer of its producer: carries its counters
  double producer_stats_[kProducerStats] = {};  // latest snapshot from the staging plans
  std::vector<std::string> notes_;              // online controller decisions not yet logged

  // The staged round's serving plan: requester r's rows sit in
  // serve_slots_[serve_offsets_[r], serve_offsets_[r + 1]), in r's request order.
  std::vector<int32_t> serve_offsets_;
  std::vector<int32_t> serve_slots_;
  int64_t staged_round_ = -1;
  // This step's requests (trainers > 1), kept from pull() for push().
  std::vector<std::vector<uint32_t>> request_table_;  // per owner: table of each row asked for
  std::vector<std::vector<uint32_t>> request_index_;  // per owner: its index among the table's unique keys
  std::vector<int> send_bytes_, receive_bytes_;
  std::vector<float> send_values_, receive_values_;  // scratch of the exchanges
  RowBlock write_back_;
  struct PendingSend {
    MPI_Request request;
    std::vector<char> bytes;
  };
  std::deque<PendingSend> write_backs_;  // to the producer, in round order
};

}  // namespace strata::store
