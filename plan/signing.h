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
absl::StatusOr<SigningKey> LoadOrCreateSigningKey(const std::string& path, bool create = true);

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

}  // namespace kfuse

#endif  // KFUSE_PLAN_SIGNING_H_
