// Ed25519 plan signing shared by kfused (signs every plan it answers) and the
// clients (verify against a pinned public key before loading any cubin), so
// both build the signed payload with one function.
//
//   KFUSE_ASSIGN_OR_RETURN(SigningKey k, LoadOrCreateSigningKey("/var/k.signing-key"));
//   SignPlan(k, &plan);                                   // server
//   KFUSE_RETURN_IF_ERROR(VerifyPlanSignature(plan, k.public_key));  // client
//
// The signed payload (PlanSigningPayload) is documented byte for byte in
// docs/security.md so that a client in another language can rebuild it.
#ifndef KFUSE_PLAN_SIGNING_H_
#define KFUSE_PLAN_SIGNING_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

struct PublicKey {
  std::array<uint8_t, 32> bytes{};
  std::string Hex() const;  // 64 lowercase hex digits.
  bool operator==(const PublicKey& o) const { return bytes == o.bytes; }
};

struct SigningKey {
  std::array<uint8_t, 32> seed{};  // The secret; the key pair derives from it.
  std::array<uint8_t, 64> secret{};
  PublicKey public_key;
};

SigningKey GenerateSigningKey();
// 32-byte seed -> key pair.
SigningKey SigningKeyFromSeed(const std::array<uint8_t, 32>& seed);

// A key file holds the seed as 64 hex digits and a newline. Loads `path`;
// when it does not exist and `create` is set, writes a new key there with
// mode 0600. PERMISSION_DENIED when the file is readable by group or others.
absl::StatusOr<SigningKey> LoadOrCreateSigningKey(const std::string& path, bool create = true,
                                                   bool* created = nullptr);

// 64 hex digits -> key; INVALID_ARGUMENT otherwise.
absl::StatusOr<PublicKey> ParsePublicKeyHex(const std::string& hex);

// The exact bytes signed for a plan (see docs/security.md): every field a
// launch depends on (key, entries, archs, sha256 of cubins and PTX, params,
// grid, block, smem, cluster, preconditions, symbols, intermediates, tensor
// specs). Informational fields (report, provenance, variant, source) are not
// covered.
std::string PlanSigningPayload(const v1::KernelPlan& plan);

// Sets plan->signature to the 64-byte detached Ed25519 signature of
// PlanSigningPayload(*plan).
void SignPlan(const SigningKey& key, v1::KernelPlan* plan);

// PERMISSION_DENIED "plan is unsigned" / "plan signature does not verify
// against the pinned key".
absl::Status VerifyPlanSignature(const v1::KernelPlan& plan, const PublicKey& pinned);

// Store entries travelling between nodes (fleet store, bundles) are signed
// by the node that made them. The payload covers every field but the
// signature itself (docs/security.md).
std::string StoreEntrySigningPayload(const v1::StoreEntry& entry);
// Sets entry->signer and entry->signature.
void SignStoreEntry(const SigningKey& key, v1::StoreEntry* entry);

// The public keys whose entries a node accepts: its own and those an
// operator lists (--trusted_keys).
class TrustedKeys {
 public:
  TrustedKeys() = default;
  explicit TrustedKeys(std::vector<PublicKey> keys) : keys_(std::move(keys)) {}
  // One 64-hex-digit key a line; blank lines and '#' comments are skipped.
  // INVALID_ARGUMENT naming the line otherwise.
  static absl::StatusOr<TrustedKeys> Parse(const std::string& text);
  static absl::StatusOr<TrustedKeys> Load(const std::string& path);
  void Add(const PublicKey& key);
  bool Contains(const PublicKey& key) const;
  size_t size() const { return keys_.size(); }
  const std::vector<PublicKey>& keys() const { return keys_; }

 private:
  std::vector<PublicKey> keys_;
};

// OK when the entry is signed by a trusted key, its signature verifies and
// its blob matches blob_sha256; PERMISSION_DENIED (untrusted or bad
// signature) or DATA_LOSS (blob) naming the entry's key otherwise. Does not
// recompute the key from its parts (cache/ knows how).
absl::Status VerifyStoreEntry(const v1::StoreEntry& entry, const TrustedKeys& trusted);

}  // namespace kfuse

#endif  // KFUSE_PLAN_SIGNING_H_
