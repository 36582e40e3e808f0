#include "clients/client.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "clients/verify.h"
#include "core/status.h"
#include "core/version.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/stub_options.h"
#include "tuner/cuda/driver.h"

namespace kfuse::client {
namespace {

constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

// grpc.health.v1.HealthCheckRequest{service}, encoded by hand: the health
// proto is not part of our generated code and has one string field.
std::string EncodeHealthRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.WriteTag((1 << 3) | 2);  // Field 1, length-delimited.
  coded.WriteVarint32(static_cast<uint32_t>(service.size()));
  coded.WriteString(service);
  return out;
}

// grpc.health.v1.HealthCheckResponse.status (field 1, enum); unknown fields
// are skipped as any proto parser would.
absl::StatusOr<HealthState> DecodeHealthResponse(const std::string& bytes) {
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(bytes.data()),
      static_cast<int>(bytes.size()));
  uint32_t status = 0;
  while (uint32_t tag = in.ReadTag()) {
    if (tag == ((1 << 3) | 0)) {
      if (!in.ReadVarint32(&status)) break;
    } else if (!google::protobuf::internal::WireFormatLite::SkipField(&in,
                                                                      tag)) {
      return absl::InternalError("malformed grpc.health.v1 response");
    }
  }
  switch (status) {
    case 1:
      return HealthState::kServing;
    case 2:
      return HealthState::kNotServing;
    case 3:
      return HealthState::kServiceUnknown;
    default:
      return HealthState::kUnknown;
  }
}

}  // namespace

const char* HealthStateName(HealthState s) {
  switch (s) {
    case HealthState::kServing:
      return "SERVING";
    case HealthState::kNotServing:
      return "NOT_SERVING";
    case HealthState::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case HealthState::kUnknown:
      break;
  }
  return "UNKNOWN";
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    const ClientOptions& options) {
  if (options.address.empty()) {
    return absl::InvalidArgumentError(
        "no server address: pass --server HOST:PORT or set KFUSE_SERVER");
  }
  if (options.max_message_bytes <= 0) {
    return absl::InvalidArgumentError("max_message_bytes must be positive");
  }
  if (options.deadline <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("deadline must be positive");
  }
  if (options.tls_cert_chain_pem.empty() != options.tls_private_key_pem.empty()) {
    return absl::InvalidArgumentError("a client certificate and its key go together (--tls-cert, --tls-key)");
  }
  if (!options.tls_cert_chain_pem.empty() && !options.tls) {
    return absl::InvalidArgumentError("a client certificate needs TLS");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (options.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs_pem;
    ssl.pem_cert_chain = options.tls_cert_chain_pem;
    ssl.pem_private_key = options.tls_private_key_pem;
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  auto channel = grpc::CreateCustomChannel(options.address, creds, args);
  if (options.connect_timeout > absl::ZeroDuration() &&
      !channel->WaitForConnected(
          absl::ToChronoTime(absl::Now() + options.connect_timeout))) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach kfused at ", options.address, " within ",
                     absl::FormatDuration(options.connect_timeout)));
  }
  return std::unique_ptr<Client>(new Client(options, std::move(channel)));
}

Client::Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(kfuse::v1::KernelService::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> Client::NewContext(
    absl::Duration extra) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(
      absl::ToChronoTime(absl::Now() + options_.deadline + extra));
  if (!options_.token.empty()) {
    ctx->AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
  return ctx;
}

absl::Status Client::Verify(const kfuse::v1::CompileResponse& response) const {
  if (!options_.verify_key) return absl::OkStatus();
  return VerifyPlan(response.plan(), *options_.verify_key);
}

void Client::FillEnvironment(kfuse::v1::CompileRequest& request) const {
  if (request.env().client().empty()) {
    request.mutable_env()->set_client(
        absl::StrCat(options_.client_name, "/", kKfuseVersion));
  }
  if (request.env().driver_version() == 0) {
    // Without a driver (a CI machine) it stays 0.
    if (absl::StatusOr<int> v = InstalledDriverVersion(); v.ok() && *v > 0) {
      request.mutable_env()->set_driver_version(static_cast<uint32_t>(*v));
    }
  }
}

absl::StatusOr<kfuse::v1::CompileResponse> Client::Compile(
    kfuse::v1::CompileRequest request) {
  FillEnvironment(request);
  // Tuning happens inside Compile too: give it the budget on top.
  auto ctx = NewContext(absl::Seconds(request.policy().budget_seconds()));
  kfuse::v1::CompileResponse response;
  KFUSE_RETURN_IF_ERROR(
      FromGrpc(stub_->Compile(ctx.get(), request, &response)));
  KFUSE_RETURN_IF_ERROR(Verify(response));
  return response;
}

absl::StatusOr<kfuse::v1::CompileResponse> Client::Tune(
    kfuse::v1::CompileRequest request,
    const std::function<void(const kfuse::v1::TuneProgress&)>& on_progress) {
  FillEnvironment(request);
  auto ctx = NewContext(absl::Seconds(request.policy().budget_seconds()));
  auto reader = stub_->Tune(ctx.get(), request);
  kfuse::v1::TuneProgress progress;
  kfuse::v1::CompileResponse result;
  bool have_result = false;
  while (reader->Read(&progress)) {
    if (progress.has_result()) {
      result = progress.result();
      have_result = true;
      // An unverified plan never reaches the caller, not even as progress.
      if (absl::Status v = Verify(result); !v.ok()) {
        ctx->TryCancel();
        reader->Finish();
        return v;
      }
    }
    if (on_progress) on_progress(progress);
  }
  KFUSE_RETURN_IF_ERROR(FromGrpc(reader->Finish()));
  if (!have_result) {
    return absl::InternalError(
        "kfused ended the Tune stream without a result (server bug)");
  }
  return result;
}

absl::StatusOr<kfuse::v1::CompileResponse> Client::Lookup(
    kfuse::v1::CompileRequest request) {
  FillEnvironment(request);
  auto ctx = NewContext();
  kfuse::v1::CompileResponse response;
  KFUSE_RETURN_IF_ERROR(FromGrpc(stub_->Lookup(ctx.get(), request, &response)));
  KFUSE_RETURN_IF_ERROR(Verify(response));
  return response;
}

absl::StatusOr<kfuse::v1::ListKernelsResponse> Client::ListKernels(
    const kfuse::v1::ListKernelsRequest& request) {
  auto ctx = NewContext();
  kfuse::v1::ListKernelsResponse response;
  KFUSE_RETURN_IF_ERROR(
      FromGrpc(stub_->ListKernels(ctx.get(), request, &response)));
  return response;
}

absl::StatusOr<kfuse::v1::DeleteKernelsResponse> Client::DeleteKernels(
    const kfuse::v1::DeleteKernelsRequest& request) {
  auto ctx = NewContext();
  kfuse::v1::DeleteKernelsResponse response;
  KFUSE_RETURN_IF_ERROR(
      FromGrpc(stub_->DeleteKernels(ctx.get(), request, &response)));
  return response;
}

absl::StatusOr<kfuse::v1::DeviceInfo> Client::GetDeviceInfo() {
  auto ctx = NewContext();
  kfuse::v1::DeviceInfo response;
  KFUSE_RETURN_IF_ERROR(FromGrpc(stub_->GetDeviceInfo(
      ctx.get(), kfuse::v1::GetDeviceInfoRequest(), &response)));
  return response;
}

absl::StatusOr<kfuse::v1::ExplainResponse> Client::Explain(
    kfuse::v1::CompileRequest request) {
  FillEnvironment(request);
  auto ctx = NewContext();
  kfuse::v1::ExplainResponse response;
  KFUSE_RETURN_IF_ERROR(
      FromGrpc(stub_->Explain(ctx.get(), request, &response)));
  return response;
}

absl::Status Client::ExportKernels(
    const kfuse::v1::ExportKernelsRequest& request,
    const std::function<absl::Status(kfuse::v1::StoreEntry&)>& on_entry) {
  auto ctx = NewContext();
  auto reader = stub_->ExportKernels(ctx.get(), request);
  kfuse::v1::StoreEntry entry;
  while (reader->Read(&entry)) {
    if (absl::Status s = on_entry(entry); !s.ok()) {
      ctx->TryCancel();
      reader->Finish();
      return s;
    }
  }
  return FromGrpc(reader->Finish());
}

absl::StatusOr<std::vector<kfuse::v1::StoreEntry>> Client::ExportKernels(
    const kfuse::v1::ExportKernelsRequest& request) {
  std::vector<kfuse::v1::StoreEntry> entries;
  KFUSE_RETURN_IF_ERROR(ExportKernels(request, [&](kfuse::v1::StoreEntry& e) {
    entries.push_back(std::move(e));
    return absl::OkStatus();
  }));
  return entries;
}

absl::StatusOr<kfuse::v1::ImportKernelsResponse> Client::ImportKernels(
    const kfuse::v1::ImportKernelsRequest& request) {
  auto ctx = NewContext();
  kfuse::v1::ImportKernelsResponse response;
  KFUSE_RETURN_IF_ERROR(
      FromGrpc(stub_->ImportKernels(ctx.get(), request, &response)));
  return response;
}

absl::StatusOr<HealthState> Client::Health(const std::string& service) {
  auto ctx = NewContext();
  grpc::GenericStub generic(channel_);
  const std::string encoded = EncodeHealthRequest(service);
  grpc::Slice slice(encoded);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  generic.UnaryCall(ctx.get(), kHealthCheckMethod, grpc::StubOptions(),
                    &request, &response, [&](grpc::Status s) {
                      status = std::move(s);
                      done.Notify();
                    });
  done.WaitForNotification();
  KFUSE_RETURN_IF_ERROR(FromGrpc(status));
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) {
    return absl::InternalError("unreadable grpc.health.v1 response");
  }
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return DecodeHealthResponse(bytes);
}

}  // namespace kfuse::client
