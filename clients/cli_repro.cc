// `kfuse repro BUNDLE`: replays a repro bundle that kfused left, on this
// machine and with this build, without a server. It regenerates the kernel
// from chain.json and variant.txt (has the generator drifted from the
// recorded kernel.cu?), compiles the kernel with this NVRTC for the recorded
// arch, and for a wrong result, fault or timeout runs it against the fp64
// yardstick on fresh random inputs through the tuner's worker when a GPU is
// here.
#include <unistd.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "clients/cli.h"
#include "clients/cli_format.h"
#include "codegen/analysis.h"
#include "codegen/generators.h"
#include "core/status.h"
#include "service/repro.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/nvrtc_compiler.h"
#include "tuner/search.h"
#include "tuner/runner.h"
#include "tuner/worker_process.h"

namespace kfuse::client {
namespace {

int Reproduces(CliIo& io, const std::string& why) {
  io.out << "reproduces: " << Printable(why) << "\n";
  return kExitFailed;
}

int NoLongerReproduces(CliIo& io, const std::string& why) {
  io.out << "no longer reproduces: " << Printable(why) << "\n";
  return kExitOk;
}

// `text`, each line indented, at most `max_lines` of them.
std::string Indented(const std::string& text, size_t max_lines = 40) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  std::string out;
  for (size_t i = 0; i < lines.size() && i < max_lines; ++i)
    absl::StrAppend(&out, "    | ", Printable(lines[i]), "\n");  // A tab too.
  if (lines.size() > max_lines)
    absl::StrAppend(&out, "    | ... (", lines.size() - max_lines,
                    " more lines)\n");
  return out;
}

// 1-based number of the first line where `a` and `b` differ.
size_t FirstDifferentLine(const std::string& a, const std::string& b) {
  size_t line = 1;
  for (size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; ++i)
    line += a[i] == '\n';
  return line;
}

void PrintRecorded(const std::string& dir, const ReproInfo& info, CliIo& io) {
  // A bundle's text is printed escaped: a hostile one must not forge lines
  // or drive the terminal.
  io.out << "bundle     " << Printable(dir) << "\n"
         << "kind       " << ReproKindName(info.kind) << "\n"
         << "key        " << Printable(info.key) << "\n"
         << "kernel     " << info.kernel_index << "  "
         << Printable(info.variant.ToString()) << " ("
         << NumericsName(info.numerics) << ")\n"
         << "recorded   "
         << Printable(absl::StrCat(
                "kfuse ", info.kfuse_version, ", generator ",
                info.generator_version, ", ", info.nvrtc_version, ", ",
                info.arch, ", ",
                info.driver_version
                    ? absl::StrCat("driver ", info.driver_version)
                    : "no driver",
                ", ", info.device ? info.device->name : "no GPU"))
         << "\n";
  for (const std::string& o : info.omitted)
    io.out << "omitted    " << Printable(o) << "\n";
  if (!info.message.empty()) {
    io.out << "message" << (info.message_truncated ? " (truncated)" : "")
           << "\n"
           << Indented(info.message);
  }
}

// The worker on this machine's GPU, or nullptr with the reason there is none.
std::unique_ptr<WorkerRunner> StartRunner(const ReproOptions& o,
                                          std::string* why) {
  absl::StatusOr<const DriverApi*> driver = LoadDriver();
  if (!driver.ok()) {
    *why = std::string(driver.status().message());
    return nullptr;
  }
  if (DeviceCount() == 0) {
    *why = "the NVIDIA driver is loaded but sees no GPU";
    return nullptr;
  }
  WorkerOptions wo;
  wo.worker_path = o.worker.empty() ? DefaultWorkerPath() : o.worker;
  wo.device = o.device;
  absl::StatusOr<std::unique_ptr<WorkerRunner>> runner =
      WorkerRunner::Create(wo);
  if (!runner.ok()) {
    *why = std::string(runner.status().message());
    return nullptr;
  }
  return *std::move(runner);
}

// Checks `fast` against the fp64 reference of the heuristic variant (the
// tuner's yardstick) on fresh random inputs; the trial for `fast`.
absl::StatusOr<Trial> RunAgainstReference(const ReproKernel& k,
                                          const ReproInfo& info,
                                          KernelSpec fast, Runner& runner,
                                          const std::string& arch, CliIo& io) {
  const Variant yardstick = FamilyHeuristic(k.chain, k.group);
  KFUSE_ASSIGN_OR_RETURN(KernelSpec ref, EmitFamily(k.chain, k.group, yardstick,
                                                    Numerics::kReference64));
  KFUSE_ASSIGN_OR_RETURN(
      KernelSpec eager,
      EmitFamily(k.chain, k.group, yardstick, Numerics::kEager));
  const std::vector<int64_t> symbols = info.symbol_values.empty()
                                           ? SymbolValuesForTuning(k.chain)
                                           : info.symbol_values;
  // The buffers as the tuner gives them to the runner.
  const BufferMap buffers = MapBuffers(k.chain, k.group, fast, symbols);
  for (KernelSpec* spec : {&fast, &ref, &eager}) KFUSE_RETURN_IF_ERROR(buffers.Apply(*spec));
  CheckTask task;
  task.inputs = buffers.inputs;
  task.outputs = buffers.outputs;
  NvrtcCompiler nvrtc;
  kfuse::CompileOptions copts;
  copts.arch = arch;
  KFUSE_ASSIGN_OR_RETURN(CompiledKernel candidate, nvrtc.Compile(fast, copts));
  KFUSE_ASSIGN_OR_RETURN(task.reference64, nvrtc.Compile(ref, copts));
  KFUSE_ASSIGN_OR_RETURN(task.eager, nvrtc.Compile(eager, copts));
  task.candidates.push_back(std::move(candidate));
  task.symbol_values = symbols;
  // The check is what matters here; a short timing only.
  task.timing.warmup = 1;
  task.timing.repeats = 3;
  task.timing.min_repeats = 1;
  task.timing.max_seconds = 0.2;
  task.timing.flush_l2 = false;
  io.out << "run        against the fp64 reference of " << yardstick.ToString()
         << ", fresh random inputs, " << arch << "\n";
  KFUSE_ASSIGN_OR_RETURN(std::vector<Trial> trials, runner.Run(task, {}));
  if (trials.empty())
    return absl::InternalError("the runner returned no trial");
  return trials.front();
}

// Compiles `source` as `entry` for `arch`; prints the result. The status of
// the compile: Internal (with the log) when NVRTC rejects the source.
absl::Status CompileAndPrint(const char* what, const std::string& entry,
                             const std::string& source, const std::string& arch,
                             CliIo& io) {
  KernelSpec spec;
  spec.entry = entry;
  spec.source = source;
  kfuse::CompileOptions copts;
  copts.arch = arch;
  copts.want_ptx = false;
  NvrtcCompiler nvrtc;
  absl::StatusOr<CompiledKernel> k = nvrtc.Compile(spec, copts);
  if (k.ok()) {
    io.out << "compile    " << what << ": OK with " << nvrtc.Version()
           << " for " << Printable(arch) << " (" << k->resources.registers
           << " registers, " << k->resources.spill_bytes << " bytes spilled)\n";
    return absl::OkStatus();
  }
  io.out << "compile    " << what << ": FAILED with " << nvrtc.Version()
         << " for " << Printable(arch) << " ("
         << absl::StatusCodeToString(k.status().code()) << ")\n"
         << Indented(std::string(k.status().message()));
  return k.status();
}

}  // namespace

int RunRepro(const GlobalOptions& g, const ReproOptions& o, CliIo& io) {
  // The report is for a person (what was recorded, what this build does):
  // refused rather than printed as text under a flag that promises JSON.
  if (g.json) {
    return ReportUsageError(g, absl::InvalidArgumentError("repro: --json is not supported; it prints a report"),
                            io);
  }
  absl::StatusOr<ReproInfo> info = ReadReproBundle(o.bundle_dir);
  if (!info.ok()) {
    ReportError(g, info.status(), io);
    return kExitUsage;
  }
  PrintRecorded(o.bundle_dir, *info, io);

  // This build's generator on the recorded chain and variant.
  const absl::StatusOr<ReproKernel> kernel = ReproKernelOf(*info);
  absl::StatusOr<KernelSpec> regenerated =
      kernel.ok() ? EmitFamily(kernel->chain, kernel->group, info->variant,
                               info->numerics)
                  : kernel.status();
  if (!regenerated.ok()) {
    io.out << "generator  cannot regenerate with this build: "
           << Printable(regenerated.status().ToString()) << "\n";
  } else if (info->source.empty()) {
    io.out << "generator  regenerated; the bundle has no kernel.cu to compare "
              "with\n";
  } else if (regenerated->source == info->source) {
    io.out << "generator  regenerated source matches kernel.cu\n";
  } else {
    io.out << "generator  DRIFT: this build's source differs from kernel.cu "
              "from line "
           << FirstDifferentLine(regenerated->source, info->source) << "\n";
  }

  // The source judged: the recorded one unless asked (or it is missing).
  const bool use_recorded = !o.regenerated && !info->source.empty();
  if (!use_recorded && !regenerated.ok()) {
    return Reproduces(
        io, "no kernel source to compile: the generator fails on this variant");
  }
  const std::string source = use_recorded ? info->source : regenerated->source;
  const std::string entry = !info->entry.empty() ? info->entry
                            : regenerated.ok()   ? regenerated->entry
                                                 : "";
  absl::Status compiled =
      CompileAndPrint(use_recorded ? "kernel.cu" : "this build's source", entry,
                      source, info->arch, io);
  if (compiled.code() == absl::StatusCode::kInvalidArgument) {
    ReportError(g, compiled, io);  // Arch or entry this NVRTC cannot take.
    return kExitUsage;
  }
  if (info->kind == ReproKind::kCompileError) {
    return compiled.ok()
               ? NoLongerReproduces(
                     io, absl::StrCat("the kernel compiles for ", info->arch))
               : Reproduces(io, "the kernel still fails to compile");
  }
  if (!compiled.ok())
    return Reproduces(io,
                      "the kernel does not compile here, so it cannot be run");

  // Wrong result, fault or timeout: only a GPU can tell.
  std::string no_gpu;
  std::unique_ptr<WorkerRunner> runner = StartRunner(o, &no_gpu);
  if (runner == nullptr) {
    io.out << "run        skipped: no GPU here (" << no_gpu << ")\n";
    return kExitOk;
  }
  if (!regenerated.ok())
    return Reproduces(
        io, "this build cannot generate the variant, so it cannot be run");
  if (regenerated->source != source)
    io.out << "run        uses this build's source (its launch contract)\n";
  absl::StatusOr<DeviceFingerprint> device = runner->Device();
  if (!device.ok())
    return Reproduces(io, absl::StrCat("the GPU is not usable: ",
                                       device.status().ToString()));
  io.out << "device     " << device->name
         << (info->device && info->device->Digest() == device->Digest()
                 ? " (the recorded device)"
                 : "")
         << "\n";
  absl::StatusOr<Trial> trial = RunAgainstReference(
      *kernel, *info, *regenerated, *runner, ArchForDevice(*device), io);
  if (!trial.ok())
    return Reproduces(
        io, absl::StrCat("the run failed: ", trial.status().ToString()));
  const std::string outcome(OutcomeName(trial->outcome));
  if (trial->outcome == Outcome::kOk) {
    return NoLongerReproduces(
        io, absl::StrCat("ok on ", device->name, ": ", trial->message));
  }
  return Reproduces(
      io, absl::StrCat(outcome, " on ", device->name, ": ", trial->message));
}

}  // namespace kfuse::client
