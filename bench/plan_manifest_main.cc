// kfuse-plan-manifest: turns a binary KernelPlan (from `kfuse compile -o`)
// into a JSON launch manifest for the Python benchmark, which has no protobuf
// stubs: each kernel's entry, its cubin (written beside the manifest), and
// grid, block and parameters evaluated for the given sizes by the same
// launch logic the C++ Launcher uses (clients/launch_config.h), so the
// benchmark launches exactly what a client would.
//
//   kfuse-plan-manifest --plan relu.pb --out relu.manifest.json [--sym n=1000003]
//
// Manifest: {"inputs": [{"name","dtype","shape"}], "outputs": [...],
//   "intermediate_bytes": [...], "state", "reason", "trials", "tuning_seconds",
//   "report": {...}, "kernels": [{"entry", "arch", "cubin", "variant", "grid",
//   "block", "cluster", "smem", "params": [{"kind":"input","index":0} |
//   {"kind":"output","index":0} | {"kind":"intermediate","index":0} |
//   {"kind":"scalar","value":N,"dtype":"i64"} |
//   {"kind":"workspace","bytes":N,"zeroed":false}]}]}
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "clients/cli_format.h"
#include "clients/launch_config.h"
#include "core/status.h"
#include "kfuse/v1/kfuse.pb.h"

ABSL_FLAG(std::string, plan, "", "binary kfuse.v1.KernelPlan file");
ABSL_FLAG(std::string, out, "", "manifest to write (JSON); cubins go beside it");
ABSL_FLAG(std::vector<std::string>, sym, {}, "symbol values, name=value,...");

namespace kfuse {
namespace {

// JSON string literal; names are client text, so everything is escaped.
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::string DTypeJson(int wire) {
  if (wire < 1 || wire > 7) return Quote("invalid");
  return Quote(std::string(DTypeName(static_cast<DType>(wire))));
}

template <typename T>
std::string Array(const T& v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

absl::StatusOr<std::string> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

absl::Status WriteAll(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
  if (!f) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

// Each tensor of the plan as a dense buffer with its shape evaluated.
absl::StatusOr<std::vector<DeviceBuffer>> Buffers(
    const google::protobuf::RepeatedPtrField<v1::TensorSpec>& specs,
    const absl::flat_hash_map<std::string, int64_t>& syms) {
  std::vector<DeviceBuffer> out;
  for (const v1::TensorSpec& s : specs) {
    DeviceBuffer b;
    b.ptr = 0;  // Address 0 satisfies every alignment; torch gives 256 bytes.
    b.dtype = static_cast<DType>(s.dtype());
    for (const v1::Dim& d : s.shape()) {
      if (d.kind_case() == v1::Dim::kSize) {
        b.shape.push_back(d.size());
        continue;
      }
      auto it = syms.find(d.symbol());
      if (it == syms.end())
        return absl::InvalidArgumentError(absl::StrCat("tensor '", s.name(), "' has symbolic dim '",
                                                       d.symbol(), "': pass --sym ", d.symbol(),
                                                       "=N"));
      b.shape.push_back(it->second);
    }
    b.strides.assign(s.strides().begin(), s.strides().end());
    out.push_back(std::move(b));
  }
  return out;
}

// {"fault": 2, "wrong_result": 1}: the failed trials by outcome.
std::string FailedTrialsJson(const v1::Provenance& p) {
  std::vector<std::string> parts;
  for (const v1::TrialOutcomeCount& c : p.failed_trials()) {
    parts.push_back(absl::StrCat(Quote(client::TrialOutcomeName(c.outcome())), ":", c.count()));
  }
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

std::string TensorsJson(const google::protobuf::RepeatedPtrField<v1::TensorSpec>& specs,
                        const std::vector<DeviceBuffer>& bufs) {
  std::vector<std::string> items;
  for (int i = 0; i < specs.size(); ++i)
    items.push_back(absl::StrCat(
        "{\"name\":", Quote(specs[i].name()), ",\"dtype\":", DTypeJson(specs[i].dtype()),
        ",\"shape\":", Array(bufs[i].shape), ",\"strides\":", Array(bufs[i].strides), "}"));
  return Array(items);
}

std::string ParamJson(const ResolvedParam& p) {
  switch (p.kind) {
    case v1::Param::KIND_BUFFER: {
      const char* kind = p.buffer.kind == BufferKind::kInput    ? "input"
                         : p.buffer.kind == BufferKind::kOutput ? "output"
                                                                : "intermediate";
      return absl::StrCat("{\"kind\":\"", kind, "\",\"index\":", p.buffer.index, "}");
    }
    case v1::Param::KIND_SCALAR:
      return absl::StrCat("{\"kind\":\"scalar\",\"value\":", p.scalar, ",\"dtype\":\"",
                          p.scalar_dtype == DType::kI32 ? "i32" : "i64", "\"}");
    case v1::Param::KIND_WORKSPACE:
      return absl::StrCat("{\"kind\":\"workspace\",\"bytes\":", p.workspace_bytes,
                          ",\"zeroed\":", p.workspace_zeroed ? "true" : "false", "}");
    default:
      return "{\"kind\":\"tensor_map\"}";  // The Python benchmark refuses these.
  }
}

absl::Status Run() {
  const std::string plan_path = absl::GetFlag(FLAGS_plan), out = absl::GetFlag(FLAGS_out);
  if (plan_path.empty() || out.empty())
    return absl::InvalidArgumentError(
        "usage: kfuse-plan-manifest --plan P.pb --out M.json [--sym n=N,...]");
  absl::flat_hash_map<std::string, int64_t> syms;
  for (const std::string& kv : absl::GetFlag(FLAGS_sym)) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    int64_t v = 0;
    if (!absl::SimpleAtoi(p.second, &v))
      return absl::InvalidArgumentError(absl::StrCat("bad --sym ", kv));
    syms[p.first] = v;
  }
  KFUSE_ASSIGN_OR_RETURN(std::string bytes, ReadAll(plan_path));
  v1::KernelPlan plan;
  if (!plan.ParseFromString(bytes))
    return absl::InvalidArgumentError(
        absl::StrCat(plan_path, " is not a binary kfuse.v1.KernelPlan"));
  KFUSE_ASSIGN_OR_RETURN(std::vector<DeviceBuffer> in, Buffers(plan.inputs(), syms));
  KFUSE_ASSIGN_OR_RETURN(std::vector<DeviceBuffer> outs, Buffers(plan.outputs(), syms));
  KFUSE_ASSIGN_OR_RETURN(LaunchConfig cfg, ResolveLaunch(plan, in, outs));

  const std::string stem =
      out.size() > 5 && out.substr(out.size() - 5) == ".json" ? out.substr(0, out.size() - 5) : out;
  std::vector<std::string> kernels;
  for (const KernelLaunch& l : cfg.kernels) {
    const v1::Kernel& k = plan.kernels(l.kernel);
    const std::string cubin = absl::StrCat(stem, ".k", l.kernel, ".cubin");
    KFUSE_RETURN_IF_ERROR(WriteAll(cubin, k.cubin()));
    std::vector<std::string> params, variant;
    for (const ResolvedParam& p : l.params) params.push_back(ParamJson(p));
    for (const auto& [name, value] : k.variant().params())
      variant.push_back(absl::StrCat(name, "=", value));
    std::sort(variant.begin(), variant.end());
    const size_t slash = cubin.find_last_of('/');
    kernels.push_back(absl::StrCat(
        "{\"entry\":", Quote(k.entry()), ",\"arch\":", Quote(k.arch()),
        ",\"cubin\":", Quote(slash == std::string::npos ? cubin : cubin.substr(slash + 1)),
        ",\"variant\":", Quote(absl::StrJoin(variant, ",")), ",\"grid\":", Array(l.grid),
        ",\"block\":", Array(l.block), ",\"cluster\":", Array(l.cluster),
        ",\"smem\":", l.dynamic_smem_bytes, ",\"empty\":", l.empty ? "true" : "false",
        ",\"registers\":", k.resources().registers(), ",\"params\":", Array(params), "}"));
  }
  const v1::RooflineReport& r = plan.report();
  std::string json = absl::StrCat(
      "{\"plan\":", Quote(plan_path), ",\"key\":", Quote(plan.key()),
      ",\"state\":", Quote(v1::TuneState_Name(plan.provenance().state())),
      ",\"reason\":", Quote(plan.provenance().reason()), ",\"trials\":", plan.provenance().trials(),
      ",\"tuning_seconds\":", plan.provenance().tuning_seconds(),
      ",\"failed_trials\":", FailedTrialsJson(plan.provenance()),
      ",\"report\":{\"bytes\":", r.bytes(), ",\"bound\":", Quote(v1::Bound_Name(r.bound())),
      ",\"predicted_seconds\":", r.predicted_seconds(),
      ",\"measured_seconds\":", r.measured_seconds(),
      ",\"fraction_of_roofline\":", r.fraction_of_roofline(), "}",
      ",\"inputs\":", TensorsJson(plan.inputs(), in),
      ",\"outputs\":", TensorsJson(plan.outputs(), outs),
      ",\"intermediate_bytes\":", Array(cfg.intermediate_bytes), ",\"kernels\":", Array(kernels),
      "}\n");
  return WriteAll(out, json);
}

}  // namespace
}  // namespace kfuse

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = kfuse::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "kfuse-plan-manifest: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
