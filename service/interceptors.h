// The server interceptors every kfused installs, in order: a request message
// that does not parse answered INVALID_ARGUMENT, then the request metrics.
//
//   builder.experimental().SetInterceptorCreators(ServerInterceptors(&metrics));
//
// gRPC's callback server ends a call whose request does not parse as
// UNIMPLEMENTED with an empty message, which reads as a method the server
// lacks. The first interceptor sees the failed parse (no received message,
// on calls of one request message) and rewrites that UNIMPLEMENTED to
// INVALID_ARGUMENT naming the method and the message type it expects; it
// comes first so that the metrics count the code the client receives.
#ifndef KFUSE_SERVICE_INTERCEPTORS_H_
#define KFUSE_SERVICE_INTERCEPTORS_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "service/auth.h"
#include "service/metrics.h"

namespace kfuse {

// The malformed-request interceptor, then `metrics`' own (not owned; it
// must outlive the server). With `tokens` (not owned; null: none needed), a
// malformed KernelService request without a valid token is UNAUTHENTICATED,
// as a well-formed one is, rather than INVALID_ARGUMENT.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> ServerInterceptors(
    Metrics* metrics, const TokenSet* tokens = nullptr);

// The INVALID_ARGUMENT message for a request to `method` ("/pkg.Service/M")
// that is missing or did not parse: names the method and, where the
// generated descriptors know it, the request's message type.
std::string MalformedRequestMessage(const std::string& method);

}  // namespace kfuse

#endif  // KFUSE_SERVICE_INTERCEPTORS_H_
