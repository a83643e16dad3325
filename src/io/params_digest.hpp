// params_digest: SHA-256 over every trained number in a canonical order, so that
// two runs that trained the same numbers print the same digest whatever their
// layout or store mode. Order: dense values (layer order), dense optimizer state,
// then every sparse row sorted by (table, key): table, key, values, optimizer state.
#pragma once

#include <string>
#include <vector>

#include "store/parameter_store.hpp"

namespace strata::io {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t bytes);
  std::string hex_digest();  // finalises

 private:
  void* context_;
};

std::string params_digest(const std::vector<float>& dense_values, const std::vector<float>& dense_optimizer_state,
                          int64_t dense_optimizer_steps, const store::RowDump& rows);

}  // namespace strata::io
