// BorrowedTablesStore: the ps store of a model whose embedding tables another
// co-trained model's servers hold ([models] share_tables, docs/MULTI_MODEL.md).
// Rows are pulled from and pushed to those servers; the model's own servers
// hold no rows but still take part in its checkpoints (each model's file is
// written by all of its ranks) and stop with it.
#pragma once

#include <memory>

#include "store/remote_ps_store.hpp"

namespace strata::store {

class BorrowedTablesStore final : public ParameterStore {
 public:
  // tables: to the owning model's servers; own_servers: to this model's.
  BorrowedTablesStore(std::unique_ptr<RemotePsStore> tables, std::unique_ptr<RemotePsStore> own_servers);

  const char* mode() const override { return "ps"; }
  void pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) override;
  void push(const data::Batch& batch, const std::vector<std::vector<float>>& grads) override;
  RowDump dump_rows() override { return tables_->dump_rows(); }
  // A round of the owner's servers (which write the rows into the owner's
  // file) and one of this model's (which write no rows into this model's).
  void checkpoint_servers(const void* stamp, size_t bytes) override;
  void shutdown() override;

 private:
  std::unique_ptr<RemotePsStore> tables_;
  std::unique_ptr<RemotePsStore> own_servers_;
};

}  // namespace strata::store
