// Client-side plan verification: a plan's cubins are loaded only if its
// Ed25519 signature verifies against a key the client pinned (kfused
// --print_public_key), so a compromised or impersonated server, or a
// tampered store, cannot get arbitrary code run on the client's GPU.
//
//   KFUSE_ASSIGN_OR_RETURN(PublicKey pinned, LoadPinnedKey("~/.config/kfuse/server.pub"));
//   KFUSE_RETURN_IF_ERROR(VerifyPlan(response.plan(), pinned));  // before any cuModuleLoad
#ifndef KFUSE_CLIENTS_VERIFY_H_
#define KFUSE_CLIENTS_VERIFY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "plan/signing.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

// PERMISSION_DENIED "plan is unsigned ..." or "plan signature does not
// verify against the pinned key ..."; OK otherwise.
absl::Status VerifyPlan(const v1::KernelPlan& plan, const PublicKey& pinned);

// `file_or_hex` is 64 hex digits, or a file holding them (what kfused
// --print_public_key prints). INVALID_ARGUMENT / NOT_FOUND otherwise.
absl::StatusOr<PublicKey> LoadPinnedKey(const std::string& file_or_hex);

}  // namespace kfuse

#endif  // KFUSE_CLIENTS_VERIFY_H_
