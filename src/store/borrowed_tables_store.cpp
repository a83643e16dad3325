#include "store/borrowed_tables_store.hpp"

namespace strata::store {

BorrowedTablesStore::BorrowedTablesStore(std::unique_ptr<RemotePsStore> tables,
                                         std::unique_ptr<RemotePsStore> own_servers)
    : tables_(std::move(tables)), own_servers_(std::move(own_servers)) {}

void BorrowedTablesStore::pull(const data::Batch& batch, std::vector<std::vector<float>>& rows, bool for_training) {
  tables_->pull(batch, rows, for_training);
  traffic_ = tables_->traffic();
}

void BorrowedTablesStore::push(const data::Batch& batch, const std::vector<std::vector<float>>& grads) {
  tables_->push(batch, grads);
  traffic_ = tables_->traffic();
}

void BorrowedTablesStore::checkpoint_servers(const void* stamp, size_t bytes) {
  tables_->checkpoint_servers(stamp, bytes);
  own_servers_->checkpoint_servers(stamp, bytes);
}

void BorrowedTablesStore::shutdown() {
  tables_->shutdown();
  own_servers_->shutdown();
}

}  // namespace strata::store
