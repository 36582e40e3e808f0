// Repro bundles: when a variant fails to compile, computes the wrong answer,
// faults or hangs, the service leaves everything needed to replay it offline
// (`kfuse repro DIR`) in one directory, so an incident on a production GPU
// becomes a test case without the client's help.
//
//   ReproInfo info;
//   info.kind = ReproKind::kCompileError;
//   info.chain = request.chain();  info.variant = v;  info.source = spec.source;
//   info.message = std::string(status.message());  ...
//   absl::StatusOr<std::string> dir = WriteReproBundle("/var/kfuse/k.db.repro", info);
//   // <root>/20250102T030405.123456Z-e425b0a3ab90-compile_error-7/
//   //   chain.json  variant.txt  kernel.cu  info.json
//   KFUSE_ASSIGN_OR_RETURN(ReproInfo again, ReadReproBundle(*dir));
//
// Names inside the root are generated (time, key digits, kind, counter),
// never taken from client text; client text (tensor and symbol names) is only
// inside chain.json, written by the protobuf JSON printer.
#ifndef KFUSE_SERVICE_REPRO_H_
#define KFUSE_SERVICE_REPRO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "codegen/emit_scalar.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/trial.h"
#include "core/variant.h"
#include "core/version.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

enum class ReproKind : uint8_t { kCompileError, kWrongResult, kFault, kTimeout };

// "compile_error", "wrong_result", "fault", "timeout".
absl::string_view ReproKindName(ReproKind k);
// The kind a trial outcome leaves a bundle for; nullopt for ok, skipped,
// launch errors and unknown outcomes.
std::optional<ReproKind> ReproKindOf(Outcome o);

struct ReproInfo {
  ReproKind kind = ReproKind::kCompileError;
  v1::Chain chain;       // The request's chain as the client sent it.
  int kernel_index = 0;  // The kernel's position in the chain's plan.
  Variant variant;
  Numerics numerics = Numerics::kFast;  // Which of the variant's kernels failed.
  std::string entry;                    // Its entry name; "" when the generator failed.
  std::string source;                   // kernel.cu; "" when the generator failed.
  std::string message;                  // The outcome's message: NVRTC log, error, max error.
  std::string key;                      // The request's artifact key.
  std::vector<int64_t> symbol_values;   // The shape bucket it was built for.
  // Versions and the machine.
  std::string kfuse_version = kKfuseVersion;
  std::string generator_version;  // "pointwise/1".
  std::string nvrtc_version;      // "nvrtc-13.0".
  std::string arch;               // "sm_90a".
  std::vector<std::string> compile_options;
  uint32_t driver_version = 0;  // 0: no GPU.
  std::optional<DeviceFingerprint> device;
  absl::Time time = absl::Now();
  // Read back only: files left out by the size cap ("kernel.cu: 3 MiB over
  // the 1 MiB cap"), and whether the message was shortened.
  std::vector<std::string> omitted;
  bool message_truncated = false;
};

struct ReproLimits {
  int max_bundles = 100;  // Bundles kept under a root; the oldest go first.
  // Per file. A larger chain.json or kernel.cu is left out (noted in
  // info.json); the message is shortened to fit.
  int64_t max_file_bytes = int64_t{1} << 20;
  // What the pipeline leaves for one request at most (one per kernel and kind).
  int per_request = 4;
};

// Writes `info` as a new bundle directory under `root` (created, mode 0700,
// if missing), then removes the oldest bundles beyond limits.max_bundles.
// Returns the bundle's path. The bundle appears whole or not at all (it is
// written aside and renamed). Errors name the path; callers log them.
absl::StatusOr<std::string> WriteReproBundle(const std::string& root, const ReproInfo& info,
                                             const ReproLimits& limits = {});

// Reads a bundle back. InvalidArgument naming the file and field for a
// malformed one, NotFound when `dir` or a required file is missing (kernel.cu
// and chain.json may be missing when the cap left them out).
absl::StatusOr<ReproInfo> ReadReproBundle(const std::string& dir);

// The bundle's kernel as the pipeline saw it: chain.json translated,
// validated and canonicalised, and the group at kernel_index of its plan.
// Regenerate its source with EmitFamily(k.chain, k.group, variant, numerics).
struct ReproKernel {
  Chain chain;
  KernelGroup group;
};
absl::StatusOr<ReproKernel> ReproKernelOf(const ReproInfo& info);

// "pointwise{block=256,vec=4}" (Variant::ToString) back into a Variant.
absl::StatusOr<Variant> ParseVariant(absl::string_view text);

// Whether `name` has the form of a bundle's directory name; only such
// directories are ever removed from a root.
bool IsReproBundleName(absl::string_view name);

}  // namespace kfuse

#endif  // KFUSE_SERVICE_REPRO_H_
