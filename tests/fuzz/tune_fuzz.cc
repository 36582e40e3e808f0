// Fuzzes the tuner's CPU side: every kernel of an accepted chain goes
// through TuneKernel's full search with a compiler that only validates its
// requests and a runner that checks each task a GPU would be given instead
// of running it. Invariants (a violation traps): every compile request and
// every task is well-formed (ValidateCompileRequest, ValidateTask), the
// task's device bytes are counted without overflow, and the search ends OK
// or with a client error, its winner one of the candidates that passed.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "codegen/canonicalize.h"
#include "codegen/partition.h"
#include "kfuse/v1/kfuse.pb.h"
#include "service/translate.h"
#include "tests/fuzz/chain_target.h"
#include "tests/fuzz/fuzz_check.h"
#include "tuner/compile_pool.h"
#include "tuner/compiler.h"
#include "tuner/runner.h"
#include "tuner/search.h"

namespace kfuse::fuzz {
namespace {

class ValidatingCompiler : public Compiler {
 public:
  absl::StatusOr<CompiledKernel> Compile(const KernelSpec& spec, const CompileOptions& opts,
                                         const std::atomic<bool>* /*cancel*/) override {
    absl::Status valid = ValidateCompileRequest(spec, opts);
    FUZZ_CHECK(valid.ok(), "compile request: " << valid);
    CompiledKernel k;
    k.spec = spec;
    k.arch = opts.arch;
    k.cubin = "not a cubin";
    return k;
  }
  std::string Version() const override { return "fuzz-1"; }
};

// Checks the task, then answers each candidate with an outcome and a time
// drawn from `pick`, its index and the task's sizes: about one in eight
// wrong, except the seed, so that the search always has a winner.
class ValidatingRunner : public Runner {
 public:
  uint64_t pick = 0;
  Variant seed;

  absl::StatusOr<std::vector<Trial>> Run(
      const CheckTask& task, const std::function<void(const Trial&)>& on_trial) override {
    absl::Status valid = ValidateTask(task);
    FUZZ_CHECK(valid.ok(), "task: " << valid);
    FUZZ_CHECK(TaskDeviceBytes(task, int64_t{50} << 20) > 0, "task device bytes");
    uint64_t sizes = 0;
    for (int64_t v : task.symbol_values) sizes = sizes * 31 + static_cast<uint64_t>(v);
    std::vector<Trial> out;
    for (size_t i = 0; i < task.candidates.size(); ++i) {
      Trial t;
      t.variant = task.candidates[i].spec.variant;
      const uint64_t draw = (pick >> (i % 61)) ^ (sizes * (i + 1));
      t.outcome = !(t.variant == seed) && draw % 8 == 0 ? Outcome::kWrongResult : Outcome::kOk;
      t.median_seconds = 1e-6 * static_cast<double>(1 + (pick >> (i % 32)) % 97);
      t.samples_seconds = {t.median_seconds};
      if (on_trial) on_trial(t);
      out.push_back(std::move(t));
    }
    return out;
  }
  absl::StatusOr<DeviceFingerprint> Device() override { return DeviceFingerprint{}; }
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* /*cancel*/) override {
    return NominalCeilings(90);
  }
};

void Check(const v1::Chain& proto, uint64_t pick) {
  static ValidatingCompiler compiler;
  static CompilePool pool(compiler, /*threads=*/1, /*max_queue=*/1 << 16);
  absl::StatusOr<Chain> typed = TranslateChain(proto);
  if (!typed.ok()) return;  // translate_fuzz checks refusals.
  const Chain chain = Canonicalize(*typed);
  absl::StatusOr<Partition> partition = PartitionChain(chain);
  if (!partition.ok()) return;
  ValidatingRunner runner;
  runner.pick = pick;
  for (const KernelGroup& group : partition->kernels) {
    absl::StatusOr<Variant> seed = SeedVariant(chain, group, 90);  // opts.arch's.
    if (!seed.ok()) {
      FUZZ_CHECK(IsClientError(seed.status()), seed.status() << "\n" << ToString(chain));
      continue;
    }
    runner.seed = *seed;
    TuneOptions opts;
    opts.mode = TuneMode::kFull;
    opts.budget_seconds = 60;  // Nothing here takes time; never the limit.
    opts.pool = &pool;
    absl::StatusOr<TuneResult> r = TuneKernel(chain, group, opts, compiler, &runner);
    if (!r.ok()) {
      FUZZ_CHECK(IsClientError(r.status()), r.status() << "\n" << ToString(chain));
      continue;
    }
    FUZZ_CHECK(r->tuned, "untuned: " << r->untuned_reason << "\n" << ToString(chain));
    bool found = false;
    for (const Trial& t : r->trials) found |= t.outcome == Outcome::kOk && t.variant == r->best;
    FUZZ_CHECK(found, "the winner " << r->best.ToString() << " is not a passing trial");
  }
}

}  // namespace
}  // namespace kfuse::fuzz

KFUSE_CHAIN_FUZZ_TARGET(kfuse::fuzz::Check)

