// A blocking C++ client for kfuse.v1.KernelService: one channel, one stub,
// gRPC status mapped to absl::Status with the same code and message. The CLI,
// the latency tool and framework integrations talk to kfused through it.
//
//   ClientOptions options;
//   options.address = "127.0.0.1:7420";
//   KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<Client> client,
//                          Client::Connect(options));
//   KFUSE_ASSIGN_OR_RETURN(kfuse::v1::CompileResponse r,
//                          client->Compile(request));
//   // r.plan() is the launch contract; r.cache() says hit or miss.
#ifndef KFUSE_CLIENTS_CLIENT_H_
#define KFUSE_CLIENTS_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kfuse/v1/kfuse.grpc.pb.h"
#include "kfuse/v1/kfuse.pb.h"
#include "plan/signing.h"

namespace kfuse::client {

// The default kfused address (kfused's --address default).
inline constexpr char kDefaultAddress[] = "127.0.0.1:7420";

struct ClientOptions {
  std::string address = kDefaultAddress;
  // Per-call deadline. Tune extends it by the policy's budget.
  absl::Duration deadline = absl::Seconds(60);
  // Largest message either way; plans with several cubins can be large.
  int max_message_bytes = 64 << 20;
  // Sent as ClientEnvironment.client ("<name>/<version>") when empty.
  std::string client_name = "kfuse-cpp";
  // TLS with these PEM roots (empty: system roots) when `tls` is set.
  bool tls = false;
  std::string tls_root_certs_pem;
  // Mutual TLS: this client's PEM certificate chain and private key (both or
  // neither; needs `tls`).
  std::string tls_cert_chain_pem;
  std::string tls_private_key_pem;
  // When set, Compile, Tune and Lookup answer PERMISSION_DENIED for a plan
  // whose signature does not verify against this key (kfused
  // --print_public_key), before the caller sees any cubin.
  std::optional<PublicKey> verify_key;
  // Sent as "authorization: Bearer <token>" when not empty.
  std::string token;
  // When > 0, Connect waits this long for the channel to be ready and
  // answers UNAVAILABLE naming the address otherwise. 0: connect lazily.
  absl::Duration connect_timeout = absl::ZeroDuration();
};

// grpc.health.v1 serving states.
enum class HealthState { kUnknown, kServing, kNotServing, kServiceUnknown };
const char* HealthStateName(HealthState s);

class Client {
 public:
  // INVALID_ARGUMENT for an empty address or a bad option; UNAVAILABLE only
  // when connect_timeout is set and the server is not reachable in time.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const ClientOptions& options);

  // Compile (and tune, as the request's policy says); answers from the store
  // when it can. The request's env.client is filled when empty.
  absl::StatusOr<kfuse::v1::CompileResponse> Compile(
      kfuse::v1::CompileRequest request);
  // As Compile, calling `on_progress` for every progress message (the last
  // one carries the result too). INTERNAL if the stream ends without one.
  absl::StatusOr<kfuse::v1::CompileResponse> Tune(
      kfuse::v1::CompileRequest request,
      const std::function<void(const kfuse::v1::TuneProgress&)>& on_progress);
  // The store only: NOT_FOUND on a miss.
  absl::StatusOr<kfuse::v1::CompileResponse> Lookup(
      kfuse::v1::CompileRequest request);
  absl::StatusOr<kfuse::v1::ListKernelsResponse> ListKernels(
      const kfuse::v1::ListKernelsRequest& request);
  absl::StatusOr<kfuse::v1::DeleteKernelsResponse> DeleteKernels(
      const kfuse::v1::DeleteKernelsRequest& request);
  absl::StatusOr<kfuse::v1::DeviceInfo> GetDeviceInfo();
  // Why this request would miss: the key parts that differ from the nearest
  // stored entry. Never compiles.
  absl::StatusOr<kfuse::v1::ExplainResponse> Explain(
      kfuse::v1::CompileRequest request);
  // Streams the selected entries, calling `on_entry` for each as it
  // arrives; an error from `on_entry` cancels the stream and is returned.
  absl::Status ExportKernels(
      const kfuse::v1::ExportKernelsRequest& request,
      const std::function<absl::Status(kfuse::v1::StoreEntry&)>& on_entry);
  // As above, collecting the entries (small exports; they are all in memory).
  absl::StatusOr<std::vector<kfuse::v1::StoreEntry>> ExportKernels(
      const kfuse::v1::ExportKernelsRequest& request);
  // Entries the server verifies (signed by a key it trusts) and stores.
  absl::StatusOr<kfuse::v1::ImportKernelsResponse> ImportKernels(
      const kfuse::v1::ImportKernelsRequest& request);
  // grpc.health.v1.Health/Check for `service` ("" is the whole server).
  absl::StatusOr<HealthState> Health(const std::string& service = "");

  const ClientOptions& options() const { return options_; }

 private:
  Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel);
  // A context with the deadline (extended by `extra`) and credentials.
  std::unique_ptr<grpc::ClientContext> NewContext(
      absl::Duration extra = absl::ZeroDuration()) const;
  void FillEnvironment(kfuse::v1::CompileRequest& request) const;
  // OK without a verify key; else VerifyPlan's answer.
  absl::Status Verify(const kfuse::v1::CompileResponse& response) const;

  ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<kfuse::v1::KernelService::Stub> stub_;
};

// gRPC status to absl::Status: same code, same message.
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace kfuse::client

#endif  // KFUSE_CLIENTS_CLIENT_H_
