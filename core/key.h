// Cache keys. A key names everything that changes a binary or a timing; its
// parts are stored beside the entry so that a miss can be explained.
//
//   CacheKey k{.chain = hash, .spec = "f32[s0:b1048576]", .device = "sm_90/…",
//              .toolchain = "nvrtc-13.0", .generator = "pointwise/3"};
//   k.DecisionKey();  // Excludes the toolchain: a driver upgrade recompiles,
//   k.ArtifactKey();  // it does not retune.
#ifndef KFUSE_CORE_KEY_H_
#define KFUSE_CORE_KEY_H_

#include <string>
#include <utility>
#include <vector>

namespace kfuse {

struct CacheKey {
  std::string chain;      // Canonical chain hash (hex sha256).
  std::string spec;       // Specialisation: baked sizes, shape bucket, policy.
  std::string device;     // Device fingerprint digest, or the target arch.
  std::string toolchain;  // NVRTC version + target arch.
  std::string generator;  // Generator version (per family variant schema).

  // Hex sha256 over every part but the toolchain: tuning decisions.
  std::string DecisionKey() const;
  // Hex sha256 over every part: compiled artifacts.
  std::string ArtifactKey() const;
  // Named parts, in a fixed order, for storage and `cache explain`.
  std::vector<std::pair<std::string, std::string>> Parts() const;

  friend bool operator==(const CacheKey& a, const CacheKey& b) { return a.Parts() == b.Parts(); }
};

// Hex sha256 of `data`.
std::string Sha256Hex(const std::string& data);

}  // namespace kfuse

#endif  // KFUSE_CORE_KEY_H_
