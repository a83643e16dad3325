#include "io/params_digest.hpp"

#include <openssl/evp.h>

#include <cstdio>

#include "common/error.hpp"

namespace strata::io {

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_ || EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(context_), EVP_sha256(), nullptr) != 1) {
    throw Error("OpenSSL could not initialise SHA-256");
  }
}

Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(context_)); }

void Sha256::update(const void* data, size_t bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(context_), data, bytes);
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(context_), digest, &length);
  std::string hex;
  char two[3];
  for (unsigned int i = 0; i < length; ++i) {
    std::snprintf(two, sizeof(two), "%02x", digest[i]);
    hex += two;
  }
  return hex;
}

std::string params_digest(const std::vector<float>& dense_values, const std::vector<float>& dense_optimizer_state,
                          int64_t dense_optimizer_steps, const store::RowDump& rows) {
  Sha256 sha;
  sha.update(dense_values.data(), dense_values.size() * sizeof(float));
  sha.update(dense_optimizer_state.data(), dense_optimizer_state.size() * sizeof(float));
  sha.update(&dense_optimizer_steps, sizeof(dense_optimizer_steps));
  for (size_t i = 0; i < rows.ids.size(); ++i) {
    sha.update(&rows.ids[i].table, sizeof(uint32_t));
    sha.update(&rows.ids[i].key, sizeof(uint64_t));
    sha.update(rows.values.data() + i * rows.width, sizeof(float) * rows.width);
  }
  return sha.hex_digest();
}

}  // namespace strata::io
