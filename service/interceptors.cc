#include "service/interceptors.h"

#include <google/protobuf/descriptor.h>
#include <grpcpp/support/status.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"

namespace kfuse {
namespace {

class MalformedRequestInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit MalformedRequestInterceptor(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    // A unary or server-streaming request is parsed before the handler runs;
    // a failed parse (or no message at all) leaves none at this hook, and the
    // callback server then ends the call UNIMPLEMENTED. Only that status is
    // rewritten: a sync handler that refuses such a call for another reason
    // (RESOURCE_EXHAUSTED, say) keeps its own.
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      malformed_ = true;
    }
    if (malformed_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      methods->ModifySendStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, MalformedRequestMessage(method_)));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool malformed_ = false;
};

class MalformedRequestInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    // Only calls with one request message: a streaming read also sees no
    // message when the client closes its side (server reflection's bidi
    // stream ends so).
    using Type = grpc::experimental::ServerRpcInfo::Type;
    if (info->type() != Type::UNARY && info->type() != Type::SERVER_STREAMING) return nullptr;
    return new MalformedRequestInterceptor(info->method() == nullptr ? "" : info->method());
  }
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
    Metrics* metrics) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
  v.push_back(std::make_unique<MalformedRequestInterceptorFactory>());
  for (auto& f : metrics->Interceptors()) v.push_back(std::move(f));
  return v;
}

}  // namespace kfuse
