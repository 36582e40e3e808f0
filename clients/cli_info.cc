// `kfuse device`, `kfuse health`, `kfuse version`.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "clients/json.h"
#include "core/version.h"
#include "google/protobuf/struct.pb.h"

namespace kfuse::client {

int RunDevice(const GlobalOptions& g, CliIo& io) {
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  auto info = (*client)->GetDeviceInfo();
  if (!info.ok()) return ReportError(g, info.status(), io);
  if (g.json) {
    io.out << ToJson(*info, /*pretty=*/false) << "\n";
  } else {
    io.out << FormatDeviceInfo(*info);
  }
  return kExitOk;
}

int RunHealth(const GlobalOptions& g, const std::string& service, CliIo& io) {
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  auto state = (*client)->Health(service);
  if (absl::IsNotFound(state.status())) {
    // The health service knows only its own names: say which.
    return ReportError(g,
                       absl::NotFoundError(absl::StrCat(state.status().message(),
                                                        " (kfused reports \"\" (the server), "
                                                        "kfuse.v1.KernelService and kfuse.v1.Tuning)")),
                       io);
  }
  if (!state.ok()) return ReportError(g, state.status(), io);
  const char* name = HealthStateName(*state);
  if (g.json) {
    google::protobuf::Struct s;
    (*s.mutable_fields())["status"].set_string_value(name);
    (*s.mutable_fields())["service"].set_string_value(service);
    io.out << ToJson(s, /*pretty=*/false) << "\n";
  } else {
    io.out << name;
    if (!service.empty()) io.out << " (" << service << ")";
    io.out << "\n";
  }
  return *state == HealthState::kServing ? kExitOk : kExitFailed;
}

int RunVersion(const GlobalOptions& g, CliIo& io) {
  if (g.json) {
    google::protobuf::Struct s;
    (*s.mutable_fields())["client"].set_string_value(kKfuseVersion);
    (*s.mutable_fields())["api"].set_string_value("kfuse.v1");
    io.out << ToJson(s, /*pretty=*/false) << "\n";
  } else {
    io.out << "kfuse " << kKfuseVersion << " (API kfuse.v1)\n";
  }
  return kExitOk;
}

}  // namespace kfuse::client
