// The tuner's search loop for one kernel of a plan: from the family's
// heuristic seed and its search space to a checked, timed winner (or the
// seed, marked untuned, with the reason). It never includes the CUDA layer:
// compiling goes through a Compiler and running through a Runner, so tests
// pass fakes.
//
//   TuneOptions opts;                      // quick mode, 2 s budget, sm_90
//   opts.arch = "sm_90a";
//   opts.ceilings = measured;              // for the roofline report
//   KFUSE_ASSIGN_OR_RETURN(TuneResult r,
//       TuneKernel(chain, group, opts, nvrtc, runner.get(),
//                  [](const Trial& t, int done, int total) { ... }));
//   // r.kernel: the winner's compiled kernel; r.tuned false => r.untuned_reason.
//
// Errors are reserved for what leaves nothing to answer with: an unsupported
// family (Unimplemented), a group the generator rejects, or a seed that does
// not compile. A candidate that fails to compile, faults or computes the
// wrong answer is a Trial; a runner that fails outright makes the result
// untuned, not an error.
#ifndef KFUSE_TUNER_SEARCH_H_
#define KFUSE_TUNER_SEARCH_H_

#include <cstdint>
#include <atomic>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "codegen/ir.h"
#include "codegen/partition.h"
#include "core/launch.h"
#include "core/roofline.h"
#include "core/trial.h"
#include "core/variant.h"
#include "tuner/compile_pool.h"
#include "tuner/compiler.h"
#include "tuner/runner.h"

namespace kfuse {

enum class TuneMode {
  kHeuristic,  // No timing: the seed.
  kQuick,      // The seed and its neighbours (one parameter changed).
  kFull,       // The space pruned by the roofline, up to max_candidates.
};

struct TuneOptions {
  TuneMode mode = TuneMode::kQuick;
  // Wall time for the whole tuning: compiling, then running. Compiling stops
  // starting new batches at half of it; what is left goes to the runner
  // (CheckTask::budget_seconds), which always times the seed, records
  // candidates it cannot start in time as kSkipped, and shares the rest
  // among the candidates' timing.
  double budget_seconds = 2.0;
  std::string arch = "sm_90";
  // Unset (not measured, all zero): nominal ceilings for `arch`.
  Ceilings ceilings;
  std::vector<int64_t> symbol_values;  // Empty: SymbolValuesForTuning(chain).
  int max_candidates = 48;
  // Compiles go to `pool` when set (shared across jobs, so NVRTC stays
  // bounded process-wide); else to a pool of `compile_threads` for this call.
  CompilePool* pool = nullptr;
  int compile_threads = 4;
  double slack = 2.0;  // CheckTask::slack.
  // Set when nobody waits for the result any more: compiles stop (NVRTC's
  // flow callback), no batch or GPU run starts, and TuneKernel returns
  // Cancelled. A run already on the GPU finishes its task.
  const std::atomic<bool>* cancel = nullptr;
};

struct TuneResult {
  Variant best;
  CompiledKernel kernel;
  std::vector<Trial> trials;  // Every candidate tried, failures included.
  double tuning_seconds = 0;
  bool tuned = false;
  // The seed itself ran on the GPU and was judged wrong (a wrong result, or
  // a launch it cannot make) while no candidate passed: `kernel` is known to
  // be wrong and must not be served. untuned_reason says how it failed.
  bool seed_failed = false;
  // How the seed's own trial failed its check (a wrong result, or a launch
  // it cannot make), whether or not another candidate passed; empty when it
  // passed, was not run, or failed in a way that proves nothing (a fault, a
  // timeout). The heuristic answer is this seed: where this is set, an
  // answer given without tuning is known wrong.
  std::string seed_failure;
  std::string untuned_reason;  // Set when !tuned.
  RooflineReport report;       // measured_seconds is 0 when untuned.
  // Where `kernel` passed its check, when tuned: CheckedSizes(the bucket).
  std::vector<std::vector<int64_t>> checked_sizes;
};

// Each trial as it finishes at the bucket; then, once more, each of those
// that passed there and failed the check at another size (its
// symbol_values set to that size).
using TuneProgressFn = std::function<void(const Trial&, int done, int total)>;

// Tunes the kernel computing `group` of validated, canonical `chain`.
// runner == nullptr (no GPU) or mode kHeuristic: the seed, compiled, untuned.
absl::StatusOr<TuneResult> TuneKernel(const Chain& chain, const KernelGroup& group,
                                      const TuneOptions& opts, Compiler& compiler, Runner* runner,
                                      const TuneProgressFn& progress = {});

// The symbol values a kernel that passed TuneKernel's or CheckKernel's check
// passed at: `bucket`, then SymbolValuesForCheck(bucket); none when the
// chain has no symbols.
std::vector<std::vector<int64_t>> CheckedSizes(absl::Span<const int64_t> bucket);

// Checks one compiled kernel as TuneKernel checks its candidates (against
// the seed's float64 and eager yardsticks), untimed:
// at opts.symbol_values (empty: SymbolValuesForTuning), then at
// SymbolValuesForCheck's sizes. For a stored decision's winner recompiled by
// another toolchain or generator version, which no check has run. The trial
// says how it fared (kOk, or the outcome at the first size it failed);
// errors: the references do not compile (Internal), the runner cannot run
// the check (its error), or opts.cancel was raised (Cancelled).
absl::StatusOr<Trial> CheckKernel(const Chain& chain, const KernelGroup& group,
                                  const CompiledKernel& kernel, const TuneOptions& opts,
                                  Compiler& compiler, Runner& runner);

// The variant TuneKernel starts from on a GPU of compute capability `cc`
// (0: any): the family's heuristic, or where that needs a later GPU, the
// first variant of the family's space that runs on `cc`.
absl::StatusOr<Variant> SeedVariant(const Chain& chain, const KernelGroup& group, int cc);

// The candidates TuneKernel would try for `mode` (no compiling): the seed
// first, then neighbours (kQuick) or the pruned space (kFull), deduplicated,
// at most max_candidates. `bound` is the roofline verdict for the kernel.
// Variants that need a later GPU than compute capability `cc` (90 for
// sm_90) are left out; 0 keeps them all. Unimplemented for families
// without a generator.
absl::StatusOr<std::vector<Variant>> CandidateVariants(const Chain& chain, const KernelGroup& group,
                                                       TuneMode mode, Bound bound,
                                                       int max_candidates, int cc = 0);

// The pointwise pruning, exposed for tests. For a memory-bound kernel every
// variant that moves the same bytes is as good as its memory access pattern,
// so it keeps the widest legal vector width only, blocks of 256 or 512 and
// 1, 2 or 4 items per thread (grid-stride variants included); when fewer
// than 6 survive (narrow dtypes, odd shapes) it keeps the whole space. A
// compute-bound kernel keeps the whole space.
std::vector<Variant> PrunePointwise(const std::vector<Variant>& space, Bound bound);

// How a kernel's buffers reach the runner, which knows inputs and outputs
// only: chain inputs keep their numbers (with the domains their ops need),
// chain outputs and the intermediates the kernel writes become outputs (the
// ones compared), intermediates it reads become extra random inputs.
struct BufferMap {
  std::vector<BufferSpec> inputs, outputs;
  std::map<std::pair<BufferRef::Kind, uint32_t>, BufferRef> remap;

  // Renumbers `spec`'s buffer parameters; Internal when it has a buffer the
  // map's seed did not.
  absl::Status Apply(KernelSpec& spec) const;
};
BufferMap MapBuffers(const Chain& chain, const KernelGroup& group, const KernelSpec& seed,
                     absl::Span<const int64_t> symbols);

// "sm_90a" -> 90; 0 when `arch` is not of that form.
int ComputeCapabilityOf(const std::string& arch);

}  // namespace kfuse

#endif  // KFUSE_TUNER_SEARCH_H_
