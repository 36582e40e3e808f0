// The composition root of a kfuse node: builds the concrete store, compiler,
// tuning runner and pipeline from options, so main() stays a few lines and
// tests can build a node with the same code.
//
//   NodeOptions o; o.store_path = "/tmp/k.db"; o.no_gpu = true;
//   KFUSE_ASSIGN_OR_RETURN(auto node, ServiceNode::Create(o));
//   KernelServiceImpl service(node->pipeline(), {});
#ifndef KFUSE_SERVICE_NODE_H_
#define KFUSE_SERVICE_NODE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cache/store.h"
#include "plan/signing.h"
#include "service/pipeline.h"
#include "tuner/compiler.h"
#include "tuner/runner.h"

namespace kfuse {

struct NodeOptions {
  std::string store_path;  // Empty: the per-user default.
  int64_t store_max_bytes = int64_t{4} << 30;
  bool no_gpu = false;
  bool read_only = false;
  int device = 0;
  int64_t gpu_memory_budget = int64_t{8} << 30;
  std::string worker_path;
  std::string node;
  // Ed25519 key file that signs every plan answered. Empty: <store>.signing-key,
  // created (mode 0600) on first start.
  std::string signing_key_path;
  // Where failed builds leave repro bundles (service/repro.h): "<store>"
  // stands for the store's path; empty: no bundles.
  std::string repro_dir = "<store>.repro";
  int repro_max_bundles = 100;
};

class ServiceNode {
 public:
  static absl::StatusOr<std::unique_ptr<ServiceNode>> Create(const NodeOptions& options);

  Pipeline* pipeline() { return pipeline_.get(); }
  bool can_tune() const { return runner_ != nullptr; }
  const std::string& store_path() const { return store_path_; }
  std::string device_name() const;
  const std::string& no_gpu_reason() const { return no_gpu_reason_; }
  const SigningKey& signing_key() const { return signing_key_; }
  const std::string& signing_key_path() const { return signing_key_path_; }

 private:
  ServiceNode() = default;

  std::string store_path_;
  std::string no_gpu_reason_;
  std::string signing_key_path_;
  SigningKey signing_key_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<Pipeline> pipeline_;
};

// $XDG_CACHE_HOME/kfuse/kfuse.db, else ~/.cache/kfuse/kfuse.db; creates the folder.
absl::StatusOr<std::string> DefaultStorePath();

// The signing key a node with these options uses, loaded or created where
// NodeOptions says; `path` (if not null) receives the file's path.
absl::StatusOr<SigningKey> LoadNodeSigningKey(const NodeOptions& options, std::string* path = nullptr);

}  // namespace kfuse

#endif  // KFUSE_SERVICE_NODE_H_
