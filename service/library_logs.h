// The libraries' own log lines as kfuse events: gRPC's (a bind that failed,
// say) as `grpc`, protobuf's (a request whose string field is not UTF-8: one
// a call, which any client can cause) as `protobuf`, each with its file and
// message. kfused routes them so under --log_format=json, where a line that
// is not JSON would break "one event a line" for collectors.
//
//   SetLogFormat(LogFormat::kJson);
//   RouteLibraryLogsToEvents();
#ifndef KFUSE_SERVICE_LIBRARY_LOGS_H_
#define KFUSE_SERVICE_LIBRARY_LOGS_H_

namespace kfuse {

// Process-wide; call once, before serving.
void RouteLibraryLogsToEvents();

}  // namespace kfuse

#endif  // KFUSE_SERVICE_LIBRARY_LOGS_H_
