#include "tuner/search.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/analysis.h"
#include "codegen/emit_scalar.h"
#include "codegen/attention.h"
#include "codegen/generators.h"
#include "codegen/matmul.h"
#include "codegen/pointwise.h"
#include "codegen/reduce.h"
#include "codegen/row.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse {
namespace {

using Clock = std::chrono::steady_clock;

// A budget already spent by compiling still runs (and times) the seed: 0
// would mean "no limit" to the runner.
constexpr double kLeastRunBudget = 1e-3;

// What the search needs from a family's generator. Families slot in here.
struct FamilyGenerator {
  Family family;
  Variant (*heuristic)(const Chain&, const KernelGroup&);
  std::vector<Variant> (*space)(const Chain&, const KernelGroup&);
  absl::StatusOr<KernelSpec> (*emit)(const Chain&, const KernelGroup&, const Variant&, Numerics);
  std::vector<Variant> (*prune)(const std::vector<Variant>&, Bound);
};

// The row space is small (36 at most), the reduction space three, the
// matmul space 24 curated tiles, the attention space at most 12: they are
// searched whole.
std::vector<Variant> KeepAll(const std::vector<Variant>& space, Bound) { return space; }

// Every family emits through codegen/generators.h, which shows a pointwise
// or row group of a plan of several kernels only what it reads and writes,
// and bounds each kernel's grid by what a launch takes.
const FamilyGenerator kFamilies[] = {
    {Family::kPointwise, &FamilyHeuristic, &FamilySpace, &EmitFamily, &PrunePointwise},
    {Family::kRowReduction, &FamilyHeuristic, &FamilySpace, &EmitFamily, &KeepAll},
    {Family::kReduction, &ReduceHeuristic, &ReduceSpace, &EmitFamily, &KeepAll},
    {Family::kMatmul, &MatmulHeuristic, &MatmulSpace, &EmitFamily, &KeepAll},
    {Family::kAttention, &AttentionHeuristic, &AttentionSpace, &EmitFamily, &KeepAll},
};

absl::StatusOr<const FamilyGenerator*> FindFamily(Family f) {
  for (const FamilyGenerator& g : kFamilies)
    if (g.family == f) return &g;
  return absl::UnimplementedError(absl::StrCat("the tuner has no generator for the ",
                                               std::string(FamilyName(f)), " family yet"));
}

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Variants differing from `seed` in exactly one parameter.
bool IsNeighbour(const Variant& seed, const Variant& v) {
  if (v.family != seed.family || v.params.size() != seed.params.size()) return false;
  int differ = 0;
  for (const auto& [name, value] : seed.params) {
    auto it = v.params.find(name);
    if (it == v.params.end()) return false;
    differ += it->second != value;
  }
  return differ == 1;
}

Ceilings CeilingsFor(const TuneOptions& opts) {
  if (opts.ceilings.measured || opts.ceilings.copy_bw > 0) return opts.ceilings;
  return NominalCeilings(ComputeCapabilityOf(opts.arch));
}

std::string Excerpt(absl::string_view s) {
  constexpr size_t kMax = 2048;
  return s.size() <= kMax ? std::string(s) : absl::StrCat(s.substr(0, kMax), " ...");
}

Trial FailedTrial(const Variant& v, Outcome o, std::string message) {
  Trial t;
  t.variant = v;
  t.outcome = o;
  t.message = std::move(message);
  return t;
}

InputDomain ToInputDomain(Domain d) {
  switch (d) {
    case Domain::kPositive:
      return InputDomain::kPositive;
    case Domain::kUnit:
      return InputDomain::kUnit;
    case Domain::kAny:
      break;
  }
  return InputDomain::kAny;
}


// Compiles `specs` in batches so the budget is looked at between batches;
// specs past the point where `stop_after` seconds have gone are not compiled
// (nullopt), except the first `always` ones.
std::vector<std::optional<absl::StatusOr<CompiledKernel>>> CompileWithin(
    const std::vector<KernelSpec>& specs, size_t always, const TuneOptions& opts,
    Compiler& compiler, Clock::time_point start, double stop_after) {
  std::unique_ptr<CompilePool> own;
  CompilePool* pool = opts.pool;
  const int threads = std::max(1, opts.compile_threads);
  if (pool == nullptr) {
    own = std::make_unique<CompilePool>(compiler, threads, std::max<int>(threads, specs.size()));
    pool = own.get();
  }
  CompileOptions copts;
  copts.arch = opts.arch;
  std::vector<std::optional<absl::StatusOr<CompiledKernel>>> out(specs.size());
  for (size_t begin = 0; begin < specs.size(); begin += threads) {
    if (begin >= always && Since(start) >= stop_after) break;
    if (opts.cancel != nullptr && opts.cancel->load()) break;
    size_t end = std::min(specs.size(), begin + threads);
    std::vector<KernelSpec> batch(specs.begin() + begin, specs.begin() + end);
    auto results = pool->CompileAll(batch, copts, opts.cancel);
    for (size_t i = 0; i < results.size(); ++i) out[begin + i] = std::move(results[i]);
  }
  return out;
}

void FillReport(const Chain& chain, absl::Span<const int64_t> symbols, RooflineReport& r) {
  for (size_t s = 0; s < chain.symbols.size() && s < symbols.size(); ++s)
    r.sizes[chain.symbols[s].name] = symbols[s];
}

std::string OutcomeSummary(const std::vector<Trial>& trials) {
  std::map<std::string, int> counts;
  for (const Trial& t : trials) counts[std::string(OutcomeName(t.outcome))]++;
  std::vector<std::string> parts;
  for (const auto& [name, n] : counts) parts.push_back(absl::StrCat(n, " ", name));
  return absl::StrJoin(parts, ", ");
}

}  // namespace

absl::Status BufferMap::Apply(KernelSpec& spec) const {
  for (KernelParam& p : spec.params) {
    BufferRef* ref = p.kind == KernelParam::Kind::kBuffer      ? &p.buffer
                     : p.kind == KernelParam::Kind::kTensorMap ? &p.tensor_map.buffer
                                                               : nullptr;
    if (ref == nullptr) continue;
    auto it = remap.find({ref->kind, ref->index});
    if (it == remap.end())
      return absl::InternalError(absl::StrCat(
          "kernel ", spec.entry, " (", spec.variant.ToString(),
          ") has a buffer parameter its seed does not: the generator broke its contract"));
    *ref = it->second;
  }
  return absl::OkStatus();
}

BufferMap MapBuffers(const Chain& chain, const KernelGroup& group, const KernelSpec& seed,
                     absl::Span<const int64_t> symbols) {
  BufferMap m;
  const std::vector<Domain> domains = InputDomains(chain);
  const std::vector<Domain> node_domains = NodeDomains(chain);
  const std::vector<IndexDomain> indices = NodeIndexDomains(chain, symbols);
  auto spec_of = [&](int32_t node) {
    const TensorType& t = chain.nodes[node].type;
    BufferSpec spec{t.dtype, static_cast<int64_t>(Elements(t, symbols)), InputDomain::kAny};
    spec.index_extent = indices[node].extent;
    spec.index_other = indices[node].other;
    return spec;
  };
  for (size_t n = 0; n < chain.nodes.size(); ++n) {
    const Node& node = chain.nodes[n];
    if (node.kind != OpKind::kInput) continue;
    uint32_t i = static_cast<uint32_t>(node.input_index);
    if (m.inputs.size() <= i) m.inputs.resize(i + 1);
    m.inputs[i] = spec_of(static_cast<int32_t>(n));
    // A strided input's buffer spans its gaps too (a padded row's), which
    // the kernels step over but must be able to address.
    m.inputs[i].elements = static_cast<int64_t>(BufferElements(node, symbols));
    if (i < domains.size()) m.inputs[i].domain = ToInputDomain(domains[i]);
    m.remap[{BufferRef::Kind::kInput, i}] = BufferRef{BufferRef::Kind::kInput, i};
  }
  const std::set<int32_t> written(group.results.begin(), group.results.end());
  for (const KernelParam& p : seed.params) {
    if (p.kind != KernelParam::Kind::kBuffer && p.kind != KernelParam::Kind::kTensorMap) continue;
    const BufferRef& ref = p.kind == KernelParam::Kind::kBuffer ? p.buffer : p.tensor_map.buffer;
    if (m.remap.count({ref.kind, ref.index})) continue;
    if (ref.kind == BufferRef::Kind::kOutput) {
      m.remap[{ref.kind, ref.index}] =
          BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(m.outputs.size())};
      m.outputs.push_back(spec_of(chain.outputs[ref.index]));
    } else if (ref.kind == BufferRef::Kind::kIntermediate) {
      const int32_t node = static_cast<int32_t>(ref.index);
      BufferSpec spec = spec_of(node);
      spec.dtype = IntermediateDType(chain, node);  // Its buffer's type.
      if (written.count(node)) {
        m.remap[{ref.kind, ref.index}] =
            BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(m.outputs.size())};
        m.outputs.push_back(spec);
      } else {
        m.remap[{ref.kind, ref.index}] =
            BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(m.inputs.size())};
        // An earlier kernel's result, drawn where this kernel's ops are
        // defined (a divisor positive), as a chain input would be.
        spec.domain = ToInputDomain(node_domains[node]);
        m.inputs.push_back(spec);
        m.inputs.back().wide_reference = ReferenceReadsIntermediatesAsDouble(group.family);
      }
    }
  }
  return m;
}


int ComputeCapabilityOf(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return 0;
  int cc = 0;
  size_t i = 3;
  for (; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) cc = cc * 10 + (arch[i] - '0');
  return i == 3 ? 0 : cc;
}

std::vector<Variant> PrunePointwise(const std::vector<Variant>& space, Bound bound) {
  if (bound == Bound::kCompute) return space;
  int64_t widest = 0;
  for (const Variant& v : space) widest = std::max(widest, v.Get("vec", 1));
  std::vector<Variant> kept;
  for (const Variant& v : space) {
    const int64_t block = v.Get("block"), items = v.Get("items", 1);
    if (v.Get("vec", 1) == widest && (block == 256 || block == 512) &&
        (items == 1 || items == 2 || items == 4))
      kept.push_back(v);
  }
  constexpr size_t kFewest = 6;
  return kept.size() < kFewest ? space : kept;
}

namespace {

// The family's heuristic, or, where that needs a later GPU than compute
// capability `cc` (0: any) or cannot be emitted (a grid past the launch
// limit, for one), the first variant of its space that runs there and can.
// Where none can, the heuristic: its error is the one reported.
Variant Seed(const FamilyGenerator& gen, const Chain& chain, const KernelGroup& group, int cc) {
  Variant seed = gen.heuristic(chain, group);
  auto serves = [&](const Variant& v) {
    return (cc <= 0 || VariantMinComputeCapability(v) <= cc) && gen.emit(chain, group, v, Numerics::kFast).ok();
  };
  if (serves(seed)) return seed;
  for (const Variant& v : gen.space(chain, group)) {
    if (serves(v)) return v;
  }
  return seed;
}

// `like` (its references mapped already: the map is the same at any size)
// at `values`, to check and not to time: one launch past the check, no
// flush, no budget (every candidate sent is checked). No candidates.
CheckTask UntimedTask(const Chain& chain, const KernelGroup& group, const KernelSpec& seed_spec,
                      absl::Span<const int64_t> values, const CheckTask& like) {
  const BufferMap buffers = MapBuffers(chain, group, seed_spec, values);
  CheckTask t;
  t.reference64 = like.reference64;
  t.eager = like.eager;
  t.inputs = buffers.inputs;
  t.outputs = buffers.outputs;
  t.symbol_values.assign(values.begin(), values.end());
  t.slack = like.slack;
  t.seed = like.seed;
  t.watchdog_seconds = like.watchdog_seconds;
  t.cancel = like.cancel;
  t.timing.warmup = 0;
  t.timing.repeats = 1;
  t.timing.min_repeats = 1;
  t.timing.flush_l2 = false;
  t.timing.max_seconds = 0.05;
  return t;
}

// The symbol values to tune and check at: opts', or the chain's bucket.
std::vector<int64_t> SymbolsFor(const Chain& chain, const TuneOptions& opts) {
  return opts.symbol_values.empty() ? SymbolValuesForTuning(chain) : opts.symbol_values;
}

// Internal: a yardstick (`what`) of `v` that did not compile, so nothing
// can be judged.
absl::Status YardstickDidNotCompile(absl::string_view what, const Variant& v,
                                    const absl::Status& s) {
  return absl::InternalError(
      absl::StrCat(what, " (", v.ToString(), ") did not compile: ", s.message()));
}

// "\"n\"=769, \"m\"=3": the symbol values of a check, named by the chain's
// symbols, quoted as client text is (escaped, at most 64 bytes; the
// service renames them in what it stores).
std::string SizesText(const Chain& chain, absl::Span<const int64_t> values) {
  std::vector<std::string> parts;
  for (size_t s = 0; s < values.size(); ++s)
    parts.push_back(absl::StrCat(s < chain.symbols.size() ? validate_internal::Quote(chain.symbols[s].name) : "?",
                                 "=", values[s]));
  return absl::StrJoin(parts, ", ");
}

// A kernel serves every size of its symbols, not only the bucket it was
// tuned at: the candidates that passed at `symbols` (trials of
// `tuned.candidates`, candidate 0 the seed) are checked again at each of
// SymbolValuesForCheck(symbols), untimed. First the seed and the three
// fastest; then, while the clock is short of `deadline`, the rest, unless
// the fastest to pass everywhere is known already (every faster one
// failed). A candidate that fails there keeps that trial's outcome, its
// message and symbol_values naming the sizes. Returns the index of the
// fastest candidate that passed everywhere (of those checked), -1 when none
// did; `failure` says why when the runner could not check.
int CheckAtOtherSizes(const Chain& chain, const KernelGroup& group, const KernelSpec& seed_spec,
                      absl::Span<const int64_t> symbols, const CheckTask& tuned, Runner& runner,
                      Clock::time_point deadline, std::vector<Trial>& trials,
                      std::string& failure) {
  std::vector<int> order;  // Passed at the tuning sizes, fastest first.
  for (size_t i = 0; i < trials.size(); ++i)
    if (trials[i].outcome == Outcome::kOk) order.push_back(static_cast<int>(i));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return trials[a].median_seconds < trials[b].median_seconds;
  });
  const std::vector<std::vector<int64_t>> sizes = SymbolValuesForCheck(symbols);
  if (order.empty() || sizes.empty()) return order.empty() ? -1 : order[0];

  std::vector<CheckTask> tasks;
  for (const std::vector<int64_t>& values : sizes)
    tasks.push_back(UntimedTask(chain, group, seed_spec, values, tuned));
  constexpr size_t kFirst = 3;
  std::vector<bool> checked(trials.size(), false);
  for (int round = 0; round < 2; ++round) {
    if (round == 1 && Clock::now() >= deadline) {
      // Out of budget: the fastest that passed everywhere of those checked.
      for (int i : order)
        if (checked[i] && trials[i].outcome == Outcome::kOk) return i;
      return -1;
    }
    std::vector<int> batch;
    if (round == 0 && trials[0].outcome == Outcome::kOk) batch.push_back(0);
    for (int i : order) {
      if (checked[i] || std::find(batch.begin(), batch.end(), i) != batch.end()) continue;
      if (round == 0 && batch.size() >= kFirst + (trials[0].outcome == Outcome::kOk)) break;
      batch.push_back(i);
    }
    for (size_t s = 0; s < tasks.size(); ++s) {
      CheckTask& t = tasks[s];
      t.candidates.clear();
      std::vector<int> at;  // Parallel to t.candidates.
      for (int i : batch) {
        if (trials[i].outcome != Outcome::kOk) continue;  // Failed at an earlier size.
        t.candidates.push_back(tuned.candidates[i]);
        at.push_back(i);
      }
      if (at.empty()) break;
      absl::StatusOr<std::vector<Trial>> ran = runner.Run(t, {});
      if (!ran.ok()) {
        failure = absl::StrCat("the check at ", SizesText(chain, sizes[s]),
                               " failed on the GPU: ", ran.status().ToString());
        return -1;
      }
      for (size_t j = 0; j < at.size(); ++j) {
        Trial r;  // A candidate the runner gave no verdict on is not known right.
        r.outcome = Outcome::kSkipped;
        r.message = "the runner gave no verdict";
        if (j < ran->size()) r = (*ran)[j];
        if (r.outcome == Outcome::kOk) continue;
        Trial& tr = trials[at[j]];
        tr.outcome = r.outcome;
        tr.message = absl::StrCat("at ", SizesText(chain, sizes[s]), " (passed at ",
                                  SizesText(chain, symbols), "): ", r.message);
        tr.symbol_values = sizes[s];
      }
    }
    for (int i : batch) checked[i] = true;
    // The fastest that passed everywhere, once every faster one is known
    // wrong: the seed does not win past a faster candidate not yet checked.
    for (int i : order) {
      if (!checked[i]) break;
      if (trials[i].outcome == Outcome::kOk) return i;
    }
  }
  return -1;
}

}  // namespace

absl::StatusOr<Variant> SeedVariant(const Chain& chain, const KernelGroup& group, int cc) {
  KFUSE_ASSIGN_OR_RETURN(const FamilyGenerator* gen, FindFamily(group.family));
  return Seed(*gen, chain, group, cc);
}

absl::StatusOr<std::vector<Variant>> CandidateVariants(const Chain& chain, const KernelGroup& group,
                                                       TuneMode mode, Bound bound,
                                                       int max_candidates, int cc) {
  KFUSE_ASSIGN_OR_RETURN(const FamilyGenerator* gen, FindFamily(group.family));
  const Variant seed = Seed(*gen, chain, group, cc);
  std::vector<Variant> out = {seed};
  if (mode == TuneMode::kHeuristic) return out;
  const std::vector<Variant> space = gen->space(chain, group);
  std::vector<Variant> pool;
  if (mode == TuneMode::kQuick) {
    for (const Variant& v : space)
      if (IsNeighbour(seed, v)) pool.push_back(v);
  } else {
    pool = gen->prune(space, bound);
  }
  std::set<Variant> seen = {seed};
  for (const Variant& v : pool) {
    if (static_cast<int>(out.size()) >= std::max(1, max_candidates)) break;
    if (cc > 0 && VariantMinComputeCapability(v) > cc) continue;
    if (seen.insert(v).second) out.push_back(v);
  }
  return out;
}

absl::StatusOr<TuneResult> TuneKernel(const Chain& chain, const KernelGroup& group,
                                      const TuneOptions& opts, Compiler& compiler, Runner* runner,
                                      const TuneProgressFn& progress) {
  const Clock::time_point start = Clock::now();
  KFUSE_ASSIGN_OR_RETURN(const FamilyGenerator* gen, FindFamily(group.family));
  const std::vector<int64_t> symbols = SymbolsFor(chain, opts);

  TuneResult result;
  result.report = Roofline(AnalyzeWork(chain, group.nodes, symbols), CeilingsFor(opts));
  FillReport(chain, symbols, result.report);
  result.best = Seed(*gen, chain, group, ComputeCapabilityOf(opts.arch));
  KFUSE_ASSIGN_OR_RETURN(KernelSpec seed_spec,
                         gen->emit(chain, group, result.best, Numerics::kFast));

  const bool heuristic_only = opts.mode == TuneMode::kHeuristic || runner == nullptr;
  if (heuristic_only) {
    CompileOptions copts;
    copts.arch = opts.arch;
    KFUSE_ASSIGN_OR_RETURN(result.kernel, compiler.Compile(seed_spec, copts, opts.cancel));
    result.untuned_reason = runner == nullptr ? "no GPU on this server" : "policy: heuristic";
    result.tuning_seconds = Since(start);
    return result;
  }

  // Candidates, then the two yardsticks, emitted; the seed stays first.
  KFUSE_ASSIGN_OR_RETURN(
      std::vector<Variant> variants,
      CandidateVariants(chain, group, opts.mode, result.report.bound, opts.max_candidates,
                        ComputeCapabilityOf(opts.arch)));
  KFUSE_ASSIGN_OR_RETURN(KernelSpec ref_spec,
                         gen->emit(chain, group, result.best, Numerics::kReference64));
  KFUSE_ASSIGN_OR_RETURN(KernelSpec eager_spec,
                         gen->emit(chain, group, result.best, Numerics::kEager));
  std::vector<KernelSpec> specs = {std::move(ref_spec), std::move(eager_spec), seed_spec};
  std::vector<Variant> spec_variants = {result.best, result.best, result.best};
  const int total = static_cast<int>(variants.size());
  int done = 0;
  auto record = [&](Trial t) {
    ++done;
    if (progress) progress(t, done, total);
    result.trials.push_back(std::move(t));
  };
  for (size_t i = 1; i < variants.size(); ++i) {
    absl::StatusOr<KernelSpec> s = gen->emit(chain, group, variants[i], Numerics::kFast);
    if (!s.ok()) {
      record(FailedTrial(variants[i], Outcome::kCompileError,
                         absl::StrCat("generator: ", s.status().message())));
      continue;
    }
    specs.push_back(*std::move(s));
    spec_variants.push_back(variants[i]);
  }

  // Compile, stopping new batches at half the budget.
  auto compiled =
      CompileWithin(specs, /*always=*/3, opts, compiler, start, 0.5 * opts.budget_seconds);
  auto cancelled = [&] { return opts.cancel != nullptr && opts.cancel->load(); };
  if (cancelled() || !compiled[0] || !compiled[1] || !compiled[2]) {
    return absl::CancelledError("tuning cancelled: no caller waits");
  }
  for (int i = 0; i < 3; ++i) {
    if (!compiled[i]->ok())
      return YardstickDidNotCompile(
          i == 0 ? "the float64 reference" : i == 1 ? "the eager reference" : "the seed kernel",
          result.best, compiled[i]->status());
  }
  result.kernel = **compiled[2];
  CheckTask task;
  std::vector<Variant> cand_variants;  // Parallel to task.candidates.
  task.reference64 = **std::move(compiled[0]);
  task.eager = **std::move(compiled[1]);
  for (size_t i = 2; i < specs.size(); ++i) {
    if (!compiled[i].has_value()) continue;  // Out of budget: not tried.
    if (!compiled[i]->ok()) {
      record(FailedTrial(spec_variants[i], Outcome::kCompileError,
                         Excerpt(compiled[i]->status().message())));
      continue;
    }
    task.candidates.push_back(**std::move(compiled[i]));
    cand_variants.push_back(spec_variants[i]);
  }

  // Check and time on the GPU, the remaining budget shared among candidates.
  const BufferMap buffers = MapBuffers(chain, group, seed_spec, symbols);
  task.inputs = buffers.inputs;
  task.outputs = buffers.outputs;
  task.symbol_values = symbols;
  task.slack = opts.slack;
  task.cancel = opts.cancel;
  // The runner gets what is left of the budget for inputs, references,
  // checks and timing; it always times the seed, skips candidates it cannot
  // start in time, and spreads the rest over the others' timing.
  const double left = opts.budget_seconds - Since(start);
  task.budget_seconds = std::max(left, kLeastRunBudget);
  task.timing.max_seconds = std::clamp(left, 0.05, 1.0);
  std::vector<CompiledKernel> kernels = task.candidates;  // Unmapped, to return.
  KFUSE_RETURN_IF_ERROR(buffers.Apply(task.reference64.spec));
  KFUSE_RETURN_IF_ERROR(buffers.Apply(task.eager.spec));
  for (CompiledKernel& k : task.candidates) KFUSE_RETURN_IF_ERROR(buffers.Apply(k.spec));
  if (cancelled()) return absl::CancelledError("tuning cancelled: no caller waits");
  absl::StatusOr<std::vector<Trial>> ran = runner->Run(task, [&](const Trial& t) {
    ++done;
    if (progress) progress(t, done, total);
  });
  result.tuning_seconds = Since(start);
  if (!ran.ok()) {
    result.untuned_reason = absl::StrCat("tuning failed on the GPU: ", ran.status().ToString());
    return result;
  }

  // The fastest candidate that passed the check at every size wins; nothing
  // else can.
  for (size_t i = 0; i < ran->size() && i < kernels.size(); ++i) {
    Trial& t = (*ran)[i];
    t.variant = cand_variants[i];
    if (t.compile_seconds == 0) t.compile_seconds = kernels[i].compile_seconds;
    if (t.resources.registers == 0) t.resources = kernels[i].resources;
  }
  const size_t tried = std::min(ran->size(), kernels.size());
  ran->resize(tried);
  std::string check_failure;
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(opts.budget_seconds));
  const int best = CheckAtOtherSizes(chain, group, seed_spec, symbols, task, *runner, deadline,
                                     *ran, check_failure);
  // A trial reported passing that failed at another size is reported again.
  for (const Trial& t : *ran)
    if (progress && !t.symbol_values.empty()) progress(t, done, total);
  const double measured = best < 0 ? 0 : (*ran)[best].median_seconds;
  result.tuning_seconds = Since(start);
  for (Trial& t : *ran) result.trials.push_back(std::move(t));
  // Only a verdict on the seed itself proves it wrong: a wrong result, or a
  // launch it cannot make. A fault or a timeout may be the worker's or the
  // GPU's (a killed process, a reset), and skipped proves nothing.
  auto seed = std::find_if(result.trials.begin(), result.trials.end(),
                           [&](const Trial& t) { return t.variant == result.best; });
  if (seed != result.trials.end() &&
      (seed->outcome == Outcome::kWrongResult || seed->outcome == Outcome::kLaunchError)) {
    result.seed_failure = absl::StrCat(std::string(OutcomeName(seed->outcome)), ": ", seed->message);
  }
  if (best < 0) {
    result.untuned_reason =
        check_failure.empty()
            ? absl::StrCat("no candidate passed the check (", OutcomeSummary(result.trials), ")")
            : absl::StrCat("tuning failed on the GPU: ", check_failure);
    if (!result.seed_failure.empty()) {
      result.seed_failed = true;
      result.untuned_reason = absl::StrCat("the heuristic variant ", result.best.ToString(),
                                           " failed on the GPU (", result.seed_failure, "), and ",
                                           result.untuned_reason);
    }
    return result;
  }
  result.tuned = true;
  result.checked_sizes = CheckedSizes(symbols);
  result.best = cand_variants[best];
  result.kernel = std::move(kernels[best]);
  result.report.measured_seconds = measured;
  result.report.fraction_of_roofline =
      measured > 0 ? result.report.predicted_seconds / measured : 0;
  return result;
}

std::vector<std::vector<int64_t>> CheckedSizes(absl::Span<const int64_t> bucket) {
  if (bucket.empty()) return {};
  std::vector<std::vector<int64_t>> out = {std::vector<int64_t>(bucket.begin(), bucket.end())};
  for (std::vector<int64_t>& s : SymbolValuesForCheck(bucket)) out.push_back(std::move(s));
  return out;
}

absl::StatusOr<Trial> CheckKernel(const Chain& chain, const KernelGroup& group,
                                  const CompiledKernel& kernel, const TuneOptions& opts,
                                  Compiler& compiler, Runner& runner) {
  KFUSE_ASSIGN_OR_RETURN(const FamilyGenerator* gen, FindFamily(group.family));
  const std::vector<int64_t> symbols = SymbolsFor(chain, opts);
  const Variant& v = kernel.spec.variant;
  // The yardsticks and the buffer map of the seed, as TuneKernel judges
  // every candidate.
  const Variant seed = Seed(*gen, chain, group, ComputeCapabilityOf(opts.arch));
  KFUSE_ASSIGN_OR_RETURN(KernelSpec seed_spec, gen->emit(chain, group, seed, Numerics::kFast));
  KFUSE_ASSIGN_OR_RETURN(KernelSpec ref_spec, gen->emit(chain, group, seed, Numerics::kReference64));
  KFUSE_ASSIGN_OR_RETURN(KernelSpec eager_spec, gen->emit(chain, group, seed, Numerics::kEager));
  auto compiled = CompileWithin({std::move(ref_spec), std::move(eager_spec)}, /*always=*/2, opts,
                                compiler, Clock::now(), 0);
  if ((opts.cancel != nullptr && opts.cancel->load()) || !compiled[0] || !compiled[1])
    return absl::CancelledError("check cancelled: no caller waits");
  for (int i = 0; i < 2; ++i) {
    if (!compiled[i]->ok())
      return YardstickDidNotCompile(i == 0 ? "the float64 reference" : "the eager reference", seed,
                                    compiled[i]->status());
  }
  const BufferMap buffers = MapBuffers(chain, group, seed_spec, symbols);
  CheckTask like;
  like.reference64 = **std::move(compiled[0]);
  like.eager = **std::move(compiled[1]);
  like.slack = opts.slack;
  like.cancel = opts.cancel;
  KFUSE_RETURN_IF_ERROR(buffers.Apply(like.reference64.spec));
  KFUSE_RETURN_IF_ERROR(buffers.Apply(like.eager.spec));
  CheckTask task = UntimedTask(chain, group, seed_spec, symbols, like);
  task.candidates = {kernel};
  KFUSE_RETURN_IF_ERROR(buffers.Apply(task.candidates[0].spec));
  KFUSE_ASSIGN_OR_RETURN(std::vector<Trial> trials, runner.Run(task, {}));
  if (trials.empty()) return absl::InternalError("the runner answered a check with no trial");
  trials.resize(1);
  trials[0].variant = v;
  if (trials[0].outcome != Outcome::kOk) {
    if (!symbols.empty())
      trials[0].message = absl::StrCat("at ", SizesText(chain, symbols), ": ", trials[0].message);
    return trials[0];
  }
  std::string failure;
  CheckAtOtherSizes(chain, group, seed_spec, symbols, task, runner, Clock::time_point::max(), trials,
                    failure);
  if (!failure.empty()) return absl::UnavailableError(failure);
  return trials[0];
}

}  // namespace kfuse
