#include "service/library_logs.h"

#include <google/protobuf/stubs/logging.h>
#include <grpc/support/log.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace kfuse {
namespace {

void GrpcLogAsEvent(gpr_log_func_args* args) {
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kError
                         : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                                   : LogLevel::kDebug;
  LogEvent(level, "grpc", {{"file", absl::StrCat(args->file, ":", args->line)}, {"message", args->message}});
}

void ProtobufLogAsEvent(google::protobuf::LogLevel level, const char* file, int line, const std::string& message) {
  const LogLevel ours = level >= google::protobuf::LOGLEVEL_ERROR     ? LogLevel::kError
                        : level == google::protobuf::LOGLEVEL_WARNING ? LogLevel::kWarning
                                                                      : LogLevel::kInfo;
  LogEvent(ours, "protobuf", {{"file", absl::StrCat(file, ":", line)}, {"message", message}});
}

}  // namespace

void RouteLibraryLogsToEvents() {
  gpr_set_log_function(GrpcLogAsEvent);
  google::protobuf::SetLogHandler(ProtobufLogAsEvent);
}

}  // namespace kfuse
