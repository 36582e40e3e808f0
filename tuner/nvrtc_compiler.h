// The real Compiler: generated CUDA C++ to cubin (and PTX) with NVRTC, with a
// server-owned option list, resource usage read from ptxas, and cancellation.
// Works without a GPU: NVRTC compiles for any named target.
//
//   NvrtcCompiler nvrtc;
//   CompileOptions opts;
//   opts.arch = "sm_90a";
//   KFUSE_ASSIGN_OR_RETURN(CompiledKernel k, nvrtc.Compile(spec, opts, &stop));
//   // k.cubin (ELF), k.ptx, k.resources.registers, k.compile_seconds
//
// Memory: NVRTC allocates per program and frees it when the program is
// destroyed, which Compile always does. At most SetMaxConcurrentCompiles()
// programs compile at once in the process (job threads and tuner pools
// alike; the others wait, cancellably), and sources over 4 MiB are refused,
// so NVRTC's memory is bounded by that many programs' peaks (measured in
// docs/reliability.md). A hard cap is the unit's MemoryMax
// (deploy/kfused.service); NVRTC reports exhaustion as
// NVRTC_ERROR_OUT_OF_MEMORY, answered as ResourceExhausted.
#ifndef KFUSE_TUNER_NVRTC_COMPILER_H_
#define KFUSE_TUNER_NVRTC_COMPILER_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tuner/compiler.h"

namespace kfuse {

inline constexpr int kDefaultMaxConcurrentCompiles = 8;

// The process-wide bound on NVRTC programs compiling at once (at least 1),
// and the most that have compiled at once since it was last set.
void SetMaxConcurrentCompiles(int n);
int PeakConcurrentCompiles();

// "nvrtc-13.0", from the loaded library (not the headers).
std::string NvrtcVersionString();

// The KnownArchs() entries this NVRTC can compile for, in KnownArchs() order
// ("sm_80", ..., "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_100f", ...).
std::vector<std::string> SupportedArchs();

// The complete option list passed to NVRTC for `opts` (already validated).
// Nothing else reaches NVRTC: no include paths, no defines, no fast math
// (generators choose intrinsics explicitly).
std::vector<std::string> NvrtcOptions(const CompileOptions& opts);

// Reads `entry`'s resources from a ptxas -v log (NVRTC 13 format):
//   ptxas info    : Compiling entry function 'k' for 'sm_90a'
//   ptxas info    : Function properties for k
//   ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes
//   spill loads ptxas info    : Used 16 registers, used 1 barriers, 384 bytes
//   smem
// spill_bytes is stores + loads; local_bytes is the stack frame. nullopt when
// the log has no "Used N registers" line for `entry`.
std::optional<Resources> ParsePtxasResources(absl::string_view log,
                                             absl::string_view entry);

// Thread safe: each Compile creates and destroys its own NVRTC program.
class NvrtcCompiler : public Compiler {
 public:
  NvrtcCompiler();

  // InvalidArgument: bad options, entry name or source, or an arch this NVRTC
  // does not support. Internal: NVRTC rejected the source (first ~4 KB of the
  // log in the message) or the entry is not an extern "C" kernel in it.
  // Cancelled: *cancel was true at one of NVRTC's checkpoints.
  // ResourceExhausted: NVRTC ran out of memory.
  absl::StatusOr<CompiledKernel> Compile(
      const KernelSpec& spec, const CompileOptions& opts,
      const std::atomic<bool>* cancel = nullptr) override;

  std::string Version() const override { return version_; }

 private:
  std::string version_;
  std::vector<std::string> supported_;
};

}  // namespace kfuse

#endif  // KFUSE_TUNER_NVRTC_COMPILER_H_
