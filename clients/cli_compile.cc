// `kfuse compile`: read a chain, compile it, write the plan and cubins, print
// the summary.
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "clients/json.h"
#include "core/status.h"

namespace kfuse::client {
namespace {

// The request from the file with the flags applied on top.
absl::StatusOr<kfuse::v1::CompileRequest> BuildRequest(
    const CompileOptions& o) {
  KFUSE_ASSIGN_OR_RETURN(kfuse::v1::CompileRequest request,
                         LoadCompileRequest(o.chain_path));
  if (!o.arch.empty()) {
    KFUSE_ASSIGN_OR_RETURN(*request.mutable_target(), ParseArch(o.arch));
  }
  if (!o.policy.empty()) {
    KFUSE_ASSIGN_OR_RETURN(kfuse::v1::TuningPolicy::Mode mode,
                           ParsePolicyMode(o.policy));
    request.mutable_policy()->set_mode(mode);
  }
  KFUSE_RETURN_IF_ERROR(CheckBudget(o.budget_seconds));
  if (o.budget_seconds > 0) {
    request.mutable_policy()->set_budget_seconds(o.budget_seconds);
  }
  if (o.source) request.set_include_source(true);
  return request;
}

// Writes what the flags ask for; returns the lines to print ("wrote ...").
absl::StatusOr<std::vector<std::string>> WriteOutputs(
    const CompileOptions& o, const kfuse::v1::KernelPlan& plan) {
  std::vector<std::string> wrote;
  if (!o.plan_out.empty()) {
    KFUSE_RETURN_IF_ERROR(WriteFile(o.plan_out, plan.SerializeAsString()));
    wrote.push_back(o.plan_out);
  }
  if (!o.plan_json_out.empty()) {
    KFUSE_RETURN_IF_ERROR(WriteFile(o.plan_json_out, ToJson(plan) + "\n"));
    wrote.push_back(o.plan_json_out);
  }
  if (o.cubin_dir.empty()) return wrote;
  std::error_code ec;
  std::filesystem::create_directories(o.cubin_dir, ec);
  if (ec) return FileError(absl::StrCat("--cubin-dir ", o.cubin_dir), ec.value());
  for (const auto& k : plan.kernels()) {
    // The server names entries; still, never let a name leave the directory.
    if (!IsSafeFileStem(k.entry())) {
      return absl::DataLossError(
          absl::StrCat("kernel entry '", k.entry(),
                       "' is not a safe file name; not writing it"));
    }
    const std::string stem = o.cubin_dir + "/" + k.entry();
    KFUSE_RETURN_IF_ERROR(WriteFile(stem + ".cubin", k.cubin()));
    wrote.push_back(stem + ".cubin");
    if (!k.source().empty()) {
      KFUSE_RETURN_IF_ERROR(WriteFile(stem + ".cu", k.source()));
      wrote.push_back(stem + ".cu");
    }
  }
  return wrote;
}

}  // namespace

int RunCompile(const GlobalOptions& g, const CompileOptions& o, CliIo& io) {
  auto request = BuildRequest(o);
  if (!request.ok()) {
    ReportError(g, request.status(), io);
    return kExitUsage;
  }
  auto client = ConnectFromFlags(g);
  if (!client.ok()) return ReportUsageError(g, client.status(), io);
  auto response = (*client)->Compile(*std::move(request));
  if (!response.ok()) return ReportError(g, response.status(), io);
  auto wrote = WriteOutputs(o, response->plan());
  if (!wrote.ok()) return ReportError(g, wrote.status(), io);
  if (g.json) {
    io.out << ToJson(WithoutBinaries(*response), /*pretty=*/false) << "\n";
    return kExitOk;
  }
  io.out << FormatPlanSummary(*response);
  for (const std::string& path : *wrote) io.out << "wrote " << path << "\n";
  if (o.source && o.cubin_dir.empty()) {
    for (const auto& k : response->plan().kernels()) {
      io.out << "// " << k.entry() << "\n" << k.source() << "\n";
    }
  }
  return kExitOk;
}

}  // namespace kfuse::client
