#include "service/interceptors.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/status.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace kfuse {
namespace {

constexpr absl::string_view kKernelServicePrefix = "/kfuse.v1.KernelService/";

class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  // `tokens` (null: none required) are checked for KernelService methods.
  MalformedRequestInterceptor(std::string method, const TokenSet* tokens)
      : method_(std::move(method)),
        tokens_(absl::StartsWith(method_, kKernelServicePrefix) ? tokens : nullptr) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (tokens_ != nullptr && methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      // As KernelServiceImpl::Authorize reads it: the first value.
      const auto* md = methods->GetRecvInitialMetadata();
      const auto it = md->find("authorization");
      authorized_ = tokens_->Check(it == md->end() ? absl::string_view()
                                                   : absl::string_view(it->second.data(), it->second.size()));
    }
    // A unary or server-streaming request is parsed before the handler runs;
    // a failed parse (or no message at all) leaves none at this hook, and the
    // callback server then ends the call UNIMPLEMENTED. Only that status is
    // rewritten: a sync handler that refuses such a call for another reason
    // (RESOURCE_EXHAUSTED, say) keeps its own. A caller without a valid
    // token learns only that: UNAUTHENTICATED, as for a message that parses.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      malformed_ = true;
    }
    if (malformed_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(
          authorized_.ok()
              ? grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, MalformedRequestMessage(method_))
              : grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(authorized_.message())));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const TokenSet* const tokens_;
  absl::Status authorized_;
  bool malformed_ = false;
};

class MalformedRequestInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MalformedRequestInterceptorFactory(const TokenSet* tokens) : tokens_(tokens) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    // Only calls with one request message: a streaming read also sees no
    // message when the client closes its side (server reflection's bidi
    // stream ends so).
    using Type = grpc::experimental::ServerRpcInfo::Type;
    if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
    return new MalformedRequestInterceptor(info->method() == nullptr ? "" : info->method(), tokens_);
  }

 private:
  const TokenSet* const tokens_;
};

}  // namespace

std::string MalformedRequestMessage(const std::string& method) {
  // "/kfuse.v1.KernelService/Compile" -> "kfuse.v1.KernelService.Compile".
  absl::string_view m = method;
  if (!m.empty() && m.front() == '/') m.remove_prefix(1);
  const google::protobuf::MethodDescriptor* d =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(absl::StrReplaceAll(m, {{"/", "."}}));
  std::string expected = d == nullptr ? "its request message" : absl::StrCat("a ", d->input_type()->full_name());
  return absl::StrCat("request: the message sent to ", method.empty() ? "this method" : method,
                      " is missing or does not parse as ", expected,
                      " (a client built from another version of the proto, or bytes that are not that message; "
                      "string fields must be UTF-8)");
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> ServerInterceptors(
    Metrics* metrics, const TokenSet* tokens) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
  v.push_back(std::make_unique<MalformedRequestInterceptorFactory>(tokens));
  for (auto& f : metrics->Interceptors()) v.push_back(std::move(f));
  return v;
}

}  // namespace kfuse
