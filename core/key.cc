#include "core/key.h"

#include <openssl/sha.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/escaping.h"

namespace kfuse {

std::string Sha256Hex(const std::string& data) {
  // OpenSSL uses the CPU's SHA extensions: a store hit hashes its blob.
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), out);
  return absl::BytesToHexString(std::string(reinterpret_cast<char*>(out), sizeof(out)));
}

std::vector<std::pair<std::string, std::string>> CacheKey::Parts() const {
  return {{"chain", chain}, {"spec", spec}, {"device", device},
          {"toolchain", toolchain}, {"generator", generator}};
}

// Length-prefixed parts, so ("ab","c") and ("a","bc") differ.
static std::string Join(const std::vector<std::pair<std::string, std::string>>& parts,
                        bool with_toolchain) {
  std::string s;
  for (const auto& [name, value] : parts) {
    if (!with_toolchain && name == "toolchain") continue;
    absl::StrAppend(&s, name, ":", value.size(), ":", value, ";");
  }
  return s;
}

std::string CacheKey::DecisionKey() const { return Sha256Hex(Join(Parts(), false)); }
std::string CacheKey::ArtifactKey() const { return Sha256Hex(Join(Parts(), true)); }

}  // namespace kfuse
