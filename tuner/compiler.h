// The compiler interface the tuner and the service take, so they can be tested
// with fakes and never include nvrtc.h; NvrtcCompiler is the real one.
//
//   NvrtcCompiler nvrtc;                 // or a fake in tests
//   CompileOptions opts;
//   opts.arch = "sm_90a";
//   absl::StatusOr<CompiledKernel> k = nvrtc.Compile(spec, opts, &cancel);
//   // InvalidArgument: bad options or entry name (our caller's bug or input).
//   // Internal: the generated source did not compile (a trial outcome,
//   //           kCompileError, message carries the start of the log).
//   // Cancelled: *cancel became true while compiling.
#ifndef KFUSE_TUNER_COMPILER_H_
#define KFUSE_TUNER_COMPILER_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/launch.h"

namespace kfuse {

// Options the server chooses; never built from client text. Everything else
// about the compile is fixed by the compiler implementation.
struct CompileOptions {
  std::string arch = "sm_90";  // Must be in KnownArchs().
  bool want_ptx = true;        // Also return PTX (for newer drivers to JIT).
  // 0: no limit; else 16..255 (--maxrregcount). ptxas ignores it for kernels
  // declared with __launch_bounds__.
  int max_registers = 0;
  bool line_info = false;  // -lineinfo, for profiling.
};

class Compiler {
 public:
  virtual ~Compiler() = default;
  // Compiles spec.source for opts.arch. Must be safe to call from many
  // threads at once. `cancel` may be null; it is polled during the compile.
  virtual absl::StatusOr<CompiledKernel> Compile(
      const KernelSpec& spec, const CompileOptions& opts,
      const std::atomic<bool>* cancel = nullptr) = 0;
  // Identifies the toolchain for cache keys, e.g. "nvrtc-13.0".
  virtual std::string Version() const = 0;
};

// The fixed allowlist of target names any compiler accepts ("sm_80",
// "sm_90a", ...). A given NVRTC may support fewer: see SupportedArchs().
const std::vector<std::string>& KnownArchs();

// InvalidArgument unless `arch` is in KnownArchs().
absl::Status ValidateArch(const std::string& arch);

// InvalidArgument unless `entry` is a generated identifier:
// [A-Za-z_][A-Za-z0-9_]{0,63}.
absl::Status ValidateEntryName(const std::string& entry);

// Checks arch, max_registers, entry name and source (non-empty, no NUL) before
// any compiler runs. Shared by all implementations, fakes included.
absl::Status ValidateCompileRequest(const KernelSpec& spec,
                                    const CompileOptions& opts);

}  // namespace kfuse

#endif  // KFUSE_TUNER_COMPILER_H_
