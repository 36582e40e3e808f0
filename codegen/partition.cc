#include "codegen/partition.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/attention.h"
#include "codegen/generators.h"
#include "codegen/pointwise_layout.h"
#include "codegen/reduce.h"
#include "codegen/row_analysis.h"
#include "codegen/subchain.h"
#include "codegen/validate.h"
#include "codegen/validate_internal.h"
#include "core/key.h"
#include "core/status.h"

namespace kfuse {
namespace {

bool IsLeaf(const Chain& c, int32_t id) {
  return c.nodes[id].kind == OpKind::kInput || c.nodes[id].kind == OpKind::kConstant;
}

// The computed nodes `roots` need, walking args up to the chain's leaves
// and the nodes `stop(id)` holds for (values read from memory).
template <typename Stop>
std::set<int32_t> Closure(const Chain& c, std::vector<int32_t> roots, Stop stop) {
  std::set<int32_t> out;
  while (!roots.empty()) {
    const int32_t id = roots.back();
    roots.pop_back();
    if (IsLeaf(c, id) || stop(id) || !out.insert(id).second) continue;
    for (int32_t a : c.nodes[id].args) roots.push_back(a);
  }
  return out;
}

}  // namespace

namespace partition_internal {

std::set<int32_t> ElementwiseClosure(const Chain& c, std::vector<int32_t> roots,
                                     const std::set<int32_t>& stored) {
  return Closure(c, std::move(roots),
                 [&](int32_t id) { return IsReduction(c.nodes[id].kind) || stored.count(id) > 0; });
}

absl::Status CheckRowKernel(const Chain& c, const KernelGroup& k) {
  KFUSE_ASSIGN_OR_RETURN(SubChain sub, Isolate(c, k));
  return AnalyzeRows(sub.chain).status();
}

absl::Status OutputsShareOneIterationSpace(const Chain& c, const std::vector<size_t>& which) {
  std::vector<Dim> space;
  for (size_t j : which) {
    const std::vector<Dim>& shape = c.nodes[c.outputs[j]].type.shape;
    std::vector<Dim> merged;
    if (!validate_internal::Broadcast(space, shape, &merged)) {
      return absl::UnimplementedError(absl::StrCat(
          "outputs[", j, "]: its shape ", validate_internal::ShapeString(c, shape),
          " does not broadcast with the earlier outputs' ", validate_internal::ShapeString(c, space),
          "; one kernel cannot write them all yet (ask for them in separate chains)"));
    }
    space = std::move(merged);
    // Each output is within the element limit, but a broadcast of several
    // can pass it (and overflow the kernel's index arithmetic).
    const int64_t limit = Limits{}.max_elements;
    if (CountElements(c, space, limit) > limit) {
      return absl::UnimplementedError(absl::StrCat(
          "outputs[", j, "]: broadcast with the earlier outputs, one kernel would iterate over "
          "more than ", limit, " elements (ask for them in separate chains)"));
    }
  }
  return absl::OkStatus();
}

// The outputs each pointwise kernel writes: one kernel iterates over the
// broadcast of its outputs' shapes, so outputs whose shapes nest (one's
// broadcast into the other's is the larger) share one, and others get one
// each. Outputs [R, 1] and [1, C] written by one kernel would have it
// iterate over R x C elements, writing each output element C or R times;
// shapes that do not broadcast at all could not be one kernel's. Largest
// first (CountElements: symbols at their max, 1 without one), so a smaller
// shape joins the kernel of a larger one it nests in, then groups whose
// spaces nest are merged. Outputs naming one node are one group's. The
// groups are ordered by their first output; all of it depends on the
// canonical chain alone (its hash keys the plan).
std::vector<OutputGroup> OutputKernels(const Chain& c, std::vector<size_t> which) {
  const int64_t limit = Limits{}.max_elements;
  std::vector<size_t> order = std::move(which);
  std::sort(order.begin(), order.end());  // The stable sort below keeps output order on ties.
  auto shape = [&](size_t j) -> const std::vector<Dim>& { return c.nodes[c.outputs[j]].type.shape; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return CountElements(c, shape(a), limit) > CountElements(c, shape(b), limit);
  });
  // Leading unit dims change no iteration space.
  auto squeezed = [](std::vector<Dim> d) {
    while (!d.empty() && d.front() == Dim::Static(1)) d.erase(d.begin());
    return d;
  };
  // The larger of two shapes when one nests in the other.
  auto nest = [&](const std::vector<Dim>& a, const std::vector<Dim>& b) -> std::optional<std::vector<Dim>> {
    std::vector<Dim> both;
    if (!validate_internal::Broadcast(a, b, &both)) return std::nullopt;
    both = squeezed(std::move(both));
    if (both != a && both != b) return std::nullopt;
    return both;
  };
  std::vector<OutputGroup> groups;
  for (size_t j : order) {
    const std::vector<Dim> mine = squeezed(shape(j));
    // The group of an earlier output naming the same node, else the first
    // whose space nests with this shape.
    auto fits = std::find_if(groups.begin(), groups.end(), [&](const OutputGroup& g) {
      return std::any_of(g.outputs.begin(), g.outputs.end(),
                         [&](size_t k) { return c.outputs[k] == c.outputs[j]; });
    });
    if (fits == groups.end()) {
      fits = std::find_if(groups.begin(), groups.end(), [&](OutputGroup& g) {
        std::optional<std::vector<Dim>> both = nest(g.space, mine);
        if (both) g.space = *std::move(both);
        return both.has_value();
      });
    }
    if (fits == groups.end()) {
      groups.push_back({mine, {j}});
    } else {
      fits->outputs.push_back(j);
    }
  }
  // A space that grew may now hold another group's (symbols without a max
  // count as 1 above, so [R, 1] and [1, S] can come before [R, S]).
  for (size_t a = 0; a < groups.size(); ++a) {
    for (size_t b = a + 1; b < groups.size();) {
      std::optional<std::vector<Dim>> both = nest(groups[a].space, groups[b].space);
      if (!both) {
        ++b;
        continue;
      }
      groups[a].space = *std::move(both);
      groups[a].outputs.insert(groups[a].outputs.end(), groups[b].outputs.begin(), groups[b].outputs.end());
      groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(b));
      b = a + 1;
    }
  }
  for (OutputGroup& g : groups) std::sort(g.outputs.begin(), g.outputs.end());
  std::sort(groups.begin(), groups.end(),
            [](const OutputGroup& a, const OutputGroup& b) { return a.outputs < b.outputs; });
  return groups;
}

}  // namespace partition_internal

namespace {

using partition_internal::ElementwiseClosure;
using partition_internal::OutputGroup;
using partition_internal::OutputKernels;
using partition_internal::OutputsShareOneIterationSpace;

std::string NotYet(OpKind k) {
  if (k == OpKind::kIota) {
    return "iota beside a matrix product is not generated yet (it is in element-wise chains and beside reductions)";
  }
  return "this op is not generated yet";
}

// A plan of the one kernel `k`, which writes every chain output.
Partition OneKernel(const Chain& c, KernelGroup k) {
  std::vector<bool> is_result(c.nodes.size(), false);
  for (int32_t o : c.outputs) is_result[o] = true;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (is_result[id]) k.results.push_back(id);
  }
  Partition p;
  p.kernels.push_back(std::move(k));
  return p;
}

// One pointwise kernel iterates over the broadcast of its outputs' shapes;
// outputs that do not broadcast together would need a kernel each.
absl::Status OutputsShareOneIterationSpace(const Chain& c) {
  std::vector<size_t> all(c.outputs.size());
  for (size_t j = 0; j < all.size(); ++j) all[j] = j;
  return OutputsShareOneIterationSpace(c, all);
}

// An element-wise chain (no views) whose outputs' shapes do not all nest:
// a pointwise kernel for each of OutputKernels' groups, each computing what
// its outputs need (work they share is computed by each). Unimplemented
// when a group would compute nothing (its outputs are chain inputs or
// constants) or its kernel is not generated: the caller then keeps one
// kernel, as before.
absl::StatusOr<Partition> KernelPerOutputShape(const Chain& c, const std::vector<OutputGroup>& groups) {
  Partition p;
  for (const OutputGroup& g : groups) {
    std::vector<int32_t> roots;
    for (size_t j : g.outputs) roots.push_back(c.outputs[j]);
    const std::set<int32_t> nodes = partition_internal::ElementwiseClosure(c, roots, {});
    if (nodes.empty()) return absl::UnimplementedError("an output group computes nothing");
    KernelGroup k;
    k.family = Family::kPointwise;
    k.nodes.assign(nodes.begin(), nodes.end());
    const std::set<int32_t> results(roots.begin(), roots.end());
    k.results.assign(results.begin(), results.end());
    std::vector<std::string> names;
    for (size_t j : g.outputs) names.push_back(absl::StrCat("outputs[", j, "]"));
    const bool viewed = std::any_of(nodes.begin(), nodes.end(), [&](int32_t id) { return IsLayout(c.nodes[id].kind); });
    k.reason = absl::StrCat("element-wise chain", viewed ? " with its layout views" : "",
                            " fused into one pass over ", validate_internal::ShapeString(c, g.space), " for ",
                            absl::StrJoin(names, ", "), "; ", partition_internal::kOutputsApart);
    KFUSE_RETURN_IF_ERROR(CanGenerateFamily(c, k, FamilyHeuristic(c, k)));
    p.kernels.push_back(std::move(k));
  }
  return p;
}

// A chain whose reductions all run along rows: one row kernel.
absl::StatusOr<Partition> RowPartition(const Chain& c) {
  KernelGroup k;
  k.family = Family::kRowReduction;
  k.reason = "row reductions fused with their element-wise neighbours";
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    OpKind kind = c.nodes[id].kind;
    if (kind != OpKind::kInput && kind != OpKind::kConstant) k.nodes.push_back(id);
  }
  Partition p = OneKernel(c, std::move(k));
  // Slices of inputs it reads in place are inputs of its own chain.
  KFUSE_RETURN_IF_ERROR(CoversChain(c, p.kernels[0]) ? AnalyzeRows(c).status()
                                                     : partition_internal::CheckRowKernel(c, p.kernels[0]));
  return p;
}

std::string AxesText(const Node& n) { return absl::StrCat("[", absl::StrJoin(n.axes, ", "), "]"); }

// Whether a reduction runs along the innermost axis of its operand alone
// (from its own type: a pointwise view hides the args of other kernels'
// nodes).
bool AlongRows(const Node& reduction) {
  const int64_t rank = reduction.type.rank() +
                       (reduction.keepdim ? 0 : static_cast<int64_t>(reduction.axes.size()));
  return rank > 0 && reduction.axes == std::vector<int64_t>{rank - 1};
}

const std::vector<Dim>& OperandShape(const Chain& c, int32_t reduction) {
  return c.nodes[c.nodes[reduction].args[0]].type.shape;
}

// The reductions `r`'s operand reads through element-wise work alone, not
// counting those in `stored`, in chain order.
std::vector<int32_t> ReductionsRead(const Chain& c, int32_t r, const std::set<int32_t>& stored) {
  std::set<int32_t> readers = ElementwiseClosure(c, {c.nodes[r].args[0]}, stored);
  readers.insert(r);
  std::set<int32_t> read;
  for (int32_t id : readers) {
    for (int32_t a : c.nodes[id].args) {
      if (IsReduction(c.nodes[a].kind) && !stored.count(a)) read.insert(a);
    }
  }
  return std::vector<int32_t>(read.begin(), read.end());
}

// A layout view a row kernel does not generate: any but an iota along its
// last axis (a row kernel's column), a reshape adding or dropping a
// per-row value's trailing unit dim and a slice of an input it reads in
// place.
bool RowsTakeNo(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  if (n.kind == OpKind::kIota) return n.axis != n.type.rank() - 1;
  return IsLayout(n.kind) && TrailingUnit(c, n) == 0 && !ReadInPlace(c, id);
}

// Whether reduction `r`'s operand reads the elements of its rows (through
// element-wise work, a chain input, an iota, a view a pointwise kernel
// stores, or another kernel's reduction result as wide as them), not only
// per-row values of its own rows: with rows one wide, a reduction of
// another's results has the same operand shape as that other, yet it
// reduces per-row values.
bool ReadsRowElements(const Chain& c, int32_t r) {
  const int32_t operand = c.nodes[r].args[0];
  const Dim& width = OperandShape(c, r).back();
  std::set<int32_t> work = partition_internal::ElementwiseClosure(c, {operand}, {});
  work.insert(operand);
  auto element = [&](int32_t id) {
    const Node& n = c.nodes[id];
    const bool source = n.kind == OpKind::kInput || n.kind == OpKind::kIota || RowsTakeNo(c, id) ||
                        ReadInPlace(c, id) ||
                        (IsReduction(n.kind) && !(AlongRows(n) && OperandShape(c, id) == OperandShape(c, r)));
    return source && n.type.rank() > 0 && n.type.shape.back() == width;
  };
  for (int32_t id : work) {
    if (element(id)) return true;
    if (IsReduction(c.nodes[id].kind)) continue;  // A per-row value: its own operand does not count.
    for (int32_t a : c.nodes[id].args) {
      if (element(a)) return true;
    }
  }
  return false;
}

// The reductions along rows whose results `r`'s kernel cannot compute
// itself, so an earlier kernel stores them: every one its operand reads
// when `r` reduces over outer axes, those over rows of another shape when
// `r` runs along rows too (a mean over the batch of a per-row loss), and
// those whose results `r` reduces as they are (per-row values, not the
// rows' elements).
std::vector<int32_t> RowResultsToStore(const Chain& c, int32_t r, const std::set<int32_t>& stored) {
  std::vector<int32_t> out;
  for (int32_t a : ReductionsRead(c, r, stored)) {
    if (!AlongRows(c.nodes[a])) continue;  // Over outer axes: its own kernel, stored before r.
    if (!AlongRows(c.nodes[r]) || OperandShape(c, a) != OperandShape(c, r) || !ReadsRowElements(c, r)) {
      out.push_back(a);
    }
  }
  return out;
}

// Plans where reductions read each other's results from memory: some
// reduction over outer axes, or one along rows reading the results of
// reductions over rows of another shape. Walking the reductions in chain
// order, each reduction over outer axes gets a kernel of its own, and the
// row results such a reduction needs are stored first by a row kernel per
// row shape; then one kernel computes the outputs left, reading what the
// earlier kernels stored. Layout views beside reductions are computed by
// pointwise kernels only: a reduction reading its operand through views
// reads it stored by a pointwise kernel first, and an output computed
// through views from reductions reads their results stored.
class StagedPartition {
 public:
  explicit StagedPartition(const Chain& c) : c_(c) {}

  absl::StatusOr<Partition> Run() {
    std::vector<int32_t> reductions;
    for (int32_t id = 0; id < static_cast<int32_t>(c_.nodes.size()); ++id) {
      if (!IsReduction(c_.nodes[id].kind)) continue;
      if (!AlongRows(c_.nodes[id])) KFUSE_RETURN_IF_ERROR(CheckOuterReduction(c_, id));
      reductions.push_back(id);
    }
    // Views between two reductions wait for the first's kernel (below).
    std::set<int32_t> deferred;
    for (int32_t r : reductions) {
      KFUSE_ASSIGN_OR_RETURN(const bool stored, StoreViewedOperand(r, /*reductions_first=*/false));
      if (!stored) deferred.insert(r);
    }
    for (int32_t r : reductions) {
      if (deferred.count(r)) KFUSE_RETURN_IF_ERROR(StoreViewedOperand(r, /*reductions_first=*/true).status());
      KFUSE_RETURN_IF_ERROR(StoreRowResultsByShape(r, RowResultsToStore(c_, r, stored_)));
      if (!AlongRows(c_.nodes[r])) KFUSE_RETURN_IF_ERROR(AddOuterReduction(r));
    }
    KFUSE_RETURN_IF_ERROR(StoreForViewedOutputs());
    KFUSE_RETURN_IF_ERROR(AddLastKernel());
    std::sort(p_.intermediates.begin(), p_.intermediates.end());
    return std::move(p_);
  }

 private:
  bool Written(int32_t id) const {
    for (const KernelGroup& k : p_.kernels) {
      if (std::find(k.results.begin(), k.results.end(), id) != k.results.end()) return true;
    }
    return false;
  }

  // The computed nodes `roots` need, reading what earlier kernels stored.
  std::set<int32_t> Work(std::vector<int32_t> roots) const {
    return Closure(c_, std::move(roots), [&](int32_t id) { return stored_.count(id) > 0; });
  }

  // The views among `ids` that rows do not take.
  std::set<int32_t> Views(const std::set<int32_t>& ids) const {
    std::set<int32_t> out;
    for (int32_t id : ids) {
      if (RowsTakeNo(c_, id)) out.insert(id);
    }
    return out;
  }

  // The views among `work` that reduction `r`'s kernel does not take: the
  // reduction family reads its operand's elements where they are, so it
  // takes no view, an iota neither.
  std::set<int32_t> ViewsFor(int32_t r, const std::set<int32_t>& work) const {
    std::set<int32_t> views = Views(work);
    if (!AlongRows(c_.nodes[r])) {
      for (int32_t id : work) {
        if (IsLayout(c_.nodes[id].kind)) views.insert(id);
      }
    }
    return views;
  }

  // A pointwise kernel storing reduction `r`'s operand where it is computed
  // through layout views: the reduction then reads it as it is in memory.
  // Where the views read another reduction's results (a view between two
  // reductions), those are stored first, by a row kernel per row shape for
  // reductions along rows (ones over outer axes come earlier in chain
  // order, and have their kernels by then): with `reductions_first` false
  // nothing is done for such an operand, and the answer is false.
  absl::StatusOr<bool> StoreViewedOperand(int32_t r, bool reductions_first) {
    const int32_t operand = c_.nodes[r].args[0];
    // Stored already, or an output an earlier kernel writes, stored by it.
    if (StoreWritten(operand)) return true;
    std::set<int32_t> work = Work({operand});
    if (!ViewsFor(r, work).empty()) {
      std::vector<int32_t> rows;
      for (int32_t id : work) {
        if (IsReduction(c_.nodes[id].kind)) rows.push_back(id);
      }
      if (!rows.empty() && !reductions_first) return false;
      for (int32_t id : rows) {
        if (!AlongRows(c_.nodes[id])) {
          return absl::UnimplementedError(absl::StrCat(
              OpLabel(c_, id), ": a reduction over outer axes read through layout views by ", OpLabel(c_, r),
              " before its own kernel is not generated yet"));
        }
      }
      KFUSE_RETURN_IF_ERROR(StoreRowResultsByShape(r, std::move(rows)));
      // The operand may be among those rows' results, or an output over
      // those rows, which their kernel writes: it stores it too.
      if (StoreWritten(operand)) return true;
      work = Work({operand});
    }
    const std::set<int32_t> views = ViewsFor(r, work);
    if (views.empty()) return true;
    KernelGroup k;
    k.family = Family::kPointwise;
    k.nodes.assign(work.begin(), work.end());
    k.results = {operand};
    k.intermediates = {operand};
    k.reason = absl::StrCat("the operand of ", OpLabel(c_, r), " through its layout views (",
                            Labels(views), "), stored: reductions read their rows as they are in memory");
    stored_.insert(operand);
    p_.intermediates.push_back(operand);
    p_.kernels.push_back(std::move(k));
    return true;
  }

  // The earlier kernel writing `id` (a chain output: a row kernel writes the
  // outputs over the rows it stores results of) stores it for later kernels
  // too, rather than a second kernel writing it again; false where no kernel
  // writes it yet. True, and nothing more, where one stores it already.
  bool StoreWritten(int32_t id) {
    if (stored_.count(id)) return true;
    for (KernelGroup& k : p_.kernels) {
      if (std::find(k.results.begin(), k.results.end(), id) == k.results.end()) continue;
      k.intermediates.insert(std::upper_bound(k.intermediates.begin(), k.intermediates.end(), id), id);
      absl::StrAppend(&k.reason, "; storing ", OpLabel(c_, id), ", an output it writes, for later kernels too");
      p_.intermediates.push_back(id);
      stored_.insert(id);
      return true;
    }
    return false;
  }

  // Outputs computed through layout views from reductions along rows: those
  // reductions' results stored by row kernels (a row shape each), so that a
  // pointwise kernel computes the outputs with their views.
  absl::Status StoreForViewedOutputs() {
    for (int32_t o : c_.outputs) {
      if (IsLeaf(c_, o) || Written(o)) continue;
      const std::set<int32_t> work = Work({o});
      const std::set<int32_t> views = Views(work);
      if (views.empty()) continue;
      std::vector<int32_t> rows;
      for (int32_t id : work) {
        if (IsReduction(c_.nodes[id].kind)) rows.push_back(id);
      }
      KFUSE_RETURN_IF_ERROR(StoreRowResultsByShape(o, std::move(rows)));
    }
    return absl::OkStatus();
  }

  // StoreRowResults for `consumer`: one row kernel per row shape, in the
  // order `rows` (reductions along rows) come. A result an earlier kernel
  // writes (a chain output) is stored by that kernel instead of computed,
  // and written, again.
  absl::Status StoreRowResultsByShape(int32_t consumer, std::vector<int32_t> rows) {
    rows.erase(std::remove_if(rows.begin(), rows.end(), [&](int32_t a) { return StoreWritten(a); }),
               rows.end());
    while (!rows.empty()) {
      std::vector<int32_t> same, rest;
      for (int32_t a : rows) {
        (OperandShape(c_, a) == OperandShape(c_, rows[0]) ? same : rest).push_back(a);
      }
      KFUSE_RETURN_IF_ERROR(StoreRowResults(consumer, same));
      rows = std::move(rest);
    }
    return absl::OkStatus();
  }

  std::string Labels(const std::set<int32_t>& ids) const {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(OpLabel(c_, id));
    return absl::StrJoin(out, ", ");
  }

  // The stored results a group of nodes reads.
  std::set<int32_t> StoredRead(const std::vector<int32_t>& nodes) const {
    std::set<int32_t> read;
    for (int32_t id : nodes) {
      for (int32_t a : c_.nodes[id].args) {
        if (stored_.count(a)) read.insert(a);
      }
    }
    return read;
  }

  // A row kernel: the row generator sees the group as a chain of its own.
  absl::Status CheckRows(const KernelGroup& k) const {
    return partition_internal::CheckRowKernel(c_, k);
  }

  // A row kernel storing `rows` (reductions over one row shape) for
  // `consumer`. It writes the chain outputs it can compute over the same
  // rows from what is stored so far too (softmax beside a loss, or
  // element-wise work of the rows' shape), so that no later kernel reads
  // those rows again.
  absl::Status StoreRowResults(int32_t consumer, const std::vector<int32_t>& rows) {
    KernelGroup k;
    k.family = Family::kRowReduction;
    std::set<int32_t> nodes = Work(rows);
    std::set<int32_t> results(rows.begin(), rows.end());
    std::set<int32_t> kept = results;  // The results later kernels read.
    // Whether reduction `id` reduces the elements of the rows `rows` do.
    auto here = [&](int32_t id) {
      return AlongRows(c_.nodes[id]) && OperandShape(c_, id) == OperandShape(c_, rows[0]) &&
             ReadsRowElements(c_, id);
    };
    // Adds the nodes `work` needs and the result `r` (stored for later
    // kernels if `keep`) where the row generator can take them.
    auto add = [&](const std::set<int32_t>& work, int32_t r, bool keep) {
      KernelGroup with = k;
      std::set<int32_t> n = nodes, out = results, stored = kept;
      n.insert(work.begin(), work.end());
      out.insert(r);
      if (keep) stored.insert(r);
      with.nodes.assign(n.begin(), n.end());
      with.results.assign(out.begin(), out.end());
      with.intermediates.assign(stored.begin(), stored.end());
      if (!CheckRows(with).ok()) return false;
      nodes = std::move(n);
      results = std::move(out);
      kept = std::move(stored);
      return true;
    };
    // Results of the same rows that later reductions need stored: stored
    // here, where the rows are read anyway, rather than by a later kernel
    // reading them again (and writing again a chain output this one writes).
    std::vector<std::string> also;
    for (int32_t reader = 0; reader < static_cast<int32_t>(c_.nodes.size()); ++reader) {
      if (!IsReduction(c_.nodes[reader].kind) || reader == consumer || stored_.count(reader)) continue;
      for (int32_t a : RowResultsToStore(c_, reader, stored_)) {
        if (results.count(a) || !here(a)) continue;
        const std::set<int32_t> work = Work({a});
        if (!std::all_of(work.begin(), work.end(),
                         [&](int32_t id) { return !IsReduction(c_.nodes[id].kind) || here(id); }) ||
            !add(work, a, /*keep=*/true)) {
          continue;
        }
        const bool split = c_.nodes[a].wire_index >= 0 && c_.nodes[a].wire_index == c_.nodes[reader].wire_index;
        also.push_back(split ? absl::StrCat(OpLabel(c_, a), "'s reductions along rows")
                             : absl::StrCat(OpLabel(c_, a), " for ", OpLabel(c_, reader)));
      }
    }
    for (int32_t o : c_.outputs) {
      if (IsLeaf(c_, o) || results.count(o) || Written(o)) continue;
      const std::set<int32_t> work = Work({o});
      bool same_rows = false, other = false;
      for (int32_t id : work) {
        if (!IsReduction(c_.nodes[id].kind)) continue;
        same_rows = same_rows || here(id);
        other = other || !here(id);
      }
      const bool elementwise_here = !same_rows && c_.nodes[o].type.shape == OperandShape(c_, rows[0]);
      if (other || (!same_rows && !elementwise_here)) continue;
      add(work, o, /*keep=*/false);  // Where it cannot, left to the last kernel.
    }
    k.nodes.assign(nodes.begin(), nodes.end());
    k.results.assign(results.begin(), results.end());
    k.intermediates.assign(kept.begin(), kept.end());
    const std::set<int32_t> read = StoredRead(k.nodes);
    // One client op that Canonicalize split (a mean over every axis).
    bool split = c_.nodes[consumer].wire_index >= 0;
    for (int32_t a : rows) split = split && c_.nodes[a].wire_index == c_.nodes[consumer].wire_index;
    const std::set<int32_t> through =
        IsReduction(c_.nodes[consumer].kind) ? ViewsFor(consumer, Work({c_.nodes[consumer].args[0]}))
                                             : Views(Work({consumer}));
    if (!IsReduction(c_.nodes[consumer].kind) && through.empty()) {  // StoreOtherRowShapes.
      k.reason = absl::StrCat("reductions along rows (", Labels(std::set<int32_t>(rows.begin(), rows.end())),
                              ") stored for ", OpLabel(c_, consumer),
                              ", which reads reductions along rows of another shape too");
    } else if (IsReduction(c_.nodes[consumer].kind) && !through.empty() &&
               results.count(c_.nodes[consumer].args[0]) && !kept.count(c_.nodes[consumer].args[0])) {
      // The operand is an output over these rows: this kernel writes it, and
      // StoreViewedOperand has it store it for the reduction too.
      k.reason = absl::StrCat("reductions along rows (", Labels(std::set<int32_t>(rows.begin(), rows.end())),
                              ") for ", OpLabel(c_, c_.nodes[consumer].args[0]),
                              ", an output computed through layout views (", Labels(through), ") that ",
                              OpLabel(c_, consumer), " reduces");
    } else if (!IsReduction(c_.nodes[consumer].kind) || !through.empty()) {
      k.reason = absl::StrCat(
          "reductions along rows (", Labels(std::set<int32_t>(rows.begin(), rows.end())), ") stored for ",
          OpLabel(c_, consumer), ", which reads them through layout views (", Labels(through), ") that ",
          IsReduction(c_.nodes[consumer].kind) ? "a pointwise kernel computes" : "row kernels do not generate");
    } else if (split) {
      k.reason = absl::StrCat(OpLabel(c_, consumer),
                              " over the innermost and outer axes, split: its reductions along "
                              "rows here, stored for the reduction over the rest");
    } else {
      k.reason = absl::StrCat(
          "reductions along rows (", Labels(std::set<int32_t>(rows.begin(), rows.end())),
          ") stored for ", OpLabel(c_, consumer), ", which reduces their results ",
          !AlongRows(c_.nodes[consumer])                                ? "over outer axes"
          : OperandShape(c_, consumer) == OperandShape(c_, rows[0]) ? "as its rows"
                                                                     : "along rows of another shape");
    }
    if (!also.empty()) {
      absl::StrAppend(&k.reason, "; storing ", absl::StrJoin(also, ", "), " too, from the same rows");
    }
    if (!read.empty()) absl::StrAppend(&k.reason, "; reading ", Labels(read), " from memory");
    KFUSE_RETURN_IF_ERROR(CheckRows(k));
    stored_.insert(kept.begin(), kept.end());
    p_.intermediates.insert(p_.intermediates.end(), kept.begin(), kept.end());
    p_.kernels.push_back(std::move(k));
    return absl::OkStatus();
  }

  absl::Status AddOuterReduction(int32_t r) {
    const Node& nd = c_.nodes[r];
    std::set<int32_t> nodes = Work({nd.args[0]});
    for (int32_t id : nodes) {
      if (IsReduction(c_.nodes[id].kind)) {
        return absl::InternalError(absl::StrCat(OpLabel(c_, r), " reads ", OpLabel(c_, id),
                                                ", which no earlier kernel stores"));
      }
    }
    nodes.insert(r);
    bool consumed = false;
    for (const Node& n : c_.nodes) {
      consumed = consumed || std::find(n.args.begin(), n.args.end(), r) != n.args.end();
    }
    KernelGroup k;
    k.family = Family::kReduction;
    k.nodes.assign(nodes.begin(), nodes.end());
    k.results = {r};
    if (consumed) {
      k.intermediates = {r};
      p_.intermediates.push_back(r);
    }
    k.reason = absl::StrCat(
        OpLabel(c_, r), " over outer axes ", AxesText(nd),
        ": a kernel of its own, as each result needs the whole reduced extent (split over "
        "threads and blocks that compute the operand inline and meet before it is written); ",
        consumed ? "later kernels read its result from memory" : "its result is a chain output");
    stored_.insert(r);
    p_.kernels.push_back(std::move(k));
    return absl::OkStatus();
  }

  // The outputs no kernel writes yet: one kernel, which recomputes the
  // element-wise work it shares with the earlier kernels: a row kernel when
  // reductions along rows remain (reading stored results broadcast, as a
  // norm reads its weight), else a pointwise kernel. Where one row kernel
  // cannot also write the outputs that reduce nothing more (they run over
  // rows of another shape), those are a pointwise kernel of their own.
  absl::Status AddLastKernel() {
    std::vector<size_t> pending;
    for (size_t j = 0; j < c_.outputs.size(); ++j) {
      if (Written(c_.outputs[j])) continue;
      if (IsLeaf(c_, c_.outputs[j])) {
        return absl::UnimplementedError(absl::StrCat(
            "outputs[", j, "]: a chain input or constant as an output beside reductions that "
            "read other kernels' results is not generated yet"));
      }
      pending.push_back(j);
    }
    // First, as the kernels storing other row shapes may write outputs too.
    KFUSE_RETURN_IF_ERROR(StoreOtherRowShapes(pending));
    std::vector<size_t> rest, plain;
    for (size_t j : pending) {
      if (Written(c_.outputs[j])) continue;
      rest.push_back(j);
      bool reduces = false;
      for (int32_t id : Work({c_.outputs[j]})) reduces = reduces || IsReduction(c_.nodes[id].kind);
      if (!reduces) plain.push_back(j);
    }
    if (rest.empty()) return absl::OkStatus();
    if (plain.size() == rest.size()) {
      KFUSE_ASSIGN_OR_RETURN(std::vector<KernelGroup> pointwise, PointwiseKernels(plain));
      for (KernelGroup& k : pointwise) p_.kernels.push_back(std::move(k));
      return absl::OkStatus();
    }
    absl::StatusOr<KernelGroup> one = LastKernel(rest);
    if (!one.ok()) {
      // Outputs reducing rows of several shapes (x.sum(-1) beside
      // y.amax(-1), y wider): a row kernel for each shape.
      absl::StatusOr<std::vector<KernelGroup>> by_shape = KernelsByRowShape(rest, plain);
      if (by_shape.ok()) {
        for (KernelGroup& k : *by_shape) p_.kernels.push_back(std::move(k));
        return absl::OkStatus();
      }
    }
    if (!one.ok() && !plain.empty()) {
      std::vector<size_t> reducing;
      for (size_t j : rest) {
        if (std::find(plain.begin(), plain.end(), j) == plain.end()) reducing.push_back(j);
      }
      absl::StatusOr<KernelGroup> rows = LastKernel(reducing);
      absl::StatusOr<std::vector<KernelGroup>> pointwise = PointwiseKernels(plain);
      if (rows.ok() && pointwise.ok()) {
        for (KernelGroup& k : *pointwise) p_.kernels.push_back(std::move(k));
        p_.kernels.push_back(*std::move(rows));
        return absl::OkStatus();
      }
    }
    if (!one.ok()) return one.status();
    p_.kernels.push_back(*std::move(one));
    return absl::OkStatus();
  }

  // An output whose reductions read rows of several shapes (x.sum(-1) +
  // y.amax(-1), y wider): the reductions over all but the shape its last
  // reduction reads are stored first, a row kernel a shape, so that one
  // kernel over the last shape's rows computes the output, reading them as
  // per-row values (as a norm reads its weight).
  // Only the reductions the output reads are stored (a softmax's sum, not
  // its row max, which the storing kernel computes on the way).
  absl::Status StoreOtherRowShapes(const std::vector<size_t>& outputs) {
    for (size_t j : outputs) {
      std::optional<std::vector<Dim>> last;  // The rows the output's last reduction reads.
      for (;;) {
        std::vector<int32_t> reductions;  // Ascending, as Work is.
        for (int32_t id : Work({c_.outputs[j]})) {
          if (IsReduction(c_.nodes[id].kind)) reductions.push_back(id);
        }
        if (reductions.empty()) break;
        if (!last) last = OperandShape(c_, reductions.back());
        std::vector<int32_t> read;  // Those of other shapes that no other one of them reads.
        for (int32_t id : reductions) {
          if (OperandShape(c_, id) == *last) continue;
          bool inner = false;
          for (int32_t o : reductions) {
            inner = inner || (o != id && OperandShape(c_, o) != *last && Work({o}).count(id) > 0);
          }
          if (!inner) read.push_back(id);
        }
        if (read.empty()) break;
        KFUSE_RETURN_IF_ERROR(StoreRowResultsByShape(c_.outputs[j], std::move(read)));
      }
    }
    return absl::OkStatus();
  }

  // The outputs `rest` (indices into c_.outputs; `plain` of them reduce
  // nothing) as a row kernel for each row shape their reductions read (an
  // output whose reductions read rows of two shapes fails), then pointwise
  // kernels for the plain ones. Unimplemented where there is one shape or
  // fewer: LastKernel's answer stands.
  absl::StatusOr<std::vector<KernelGroup>> KernelsByRowShape(const std::vector<size_t>& rest,
                                                             const std::vector<size_t>& plain) const {
    std::vector<std::vector<Dim>> shapes;
    std::vector<std::vector<size_t>> outputs;
    for (size_t j : rest) {
      if (std::find(plain.begin(), plain.end(), j) != plain.end()) continue;
      std::optional<std::vector<Dim>> shape;
      for (int32_t id : Work({c_.outputs[j]})) {
        if (!IsReduction(c_.nodes[id].kind)) continue;
        if (shape && *shape != OperandShape(c_, id)) {
          return absl::UnimplementedError(absl::StrCat("outputs[", j, "]: reads rows of two shapes"));
        }
        shape = OperandShape(c_, id);
      }
      if (!shape) return absl::UnimplementedError(absl::StrCat("outputs[", j, "]: reduces no rows"));
      const auto at = std::find(shapes.begin(), shapes.end(), *shape);
      if (at == shapes.end()) {
        shapes.push_back(*shape);
        outputs.push_back({j});
      } else {
        outputs[at - shapes.begin()].push_back(j);
      }
    }
    if (shapes.size() < 2) return absl::UnimplementedError("one row shape");
    std::vector<KernelGroup> out;
    for (const std::vector<size_t>& which : outputs) {
      KFUSE_ASSIGN_OR_RETURN(KernelGroup k, LastKernel(which));
      absl::StrAppend(&k.reason, "; a row kernel for each row shape the outputs reduce");
      out.push_back(std::move(k));
    }
    if (!plain.empty()) {
      KFUSE_ASSIGN_OR_RETURN(std::vector<KernelGroup> pointwise, PointwiseKernels(plain));
      for (KernelGroup& k : pointwise) out.push_back(std::move(k));
    }
    return out;
  }

  // Pointwise kernels for the outputs `which` (indices into c_.outputs, none
  // reducing): one for each group whose shapes nest (OutputKernels).
  absl::StatusOr<std::vector<KernelGroup>> PointwiseKernels(const std::vector<size_t>& which) const {
    const std::vector<OutputGroup> groups = OutputKernels(c_, which);
    std::vector<KernelGroup> out;
    for (const OutputGroup& g : groups) {
      KFUSE_ASSIGN_OR_RETURN(KernelGroup k, LastKernel(g.outputs));
      if (groups.size() > 1) absl::StrAppend(&k.reason, "; ", partition_internal::kOutputsApart);
      out.push_back(std::move(k));
    }
    return out;
  }

  // One kernel computing the outputs `which` (indices into c_.outputs).
  absl::StatusOr<KernelGroup> LastKernel(const std::vector<size_t>& which) const {
    std::vector<int32_t> roots;
    for (size_t j : which) roots.push_back(c_.outputs[j]);
    const std::set<int32_t> nodes = Work(roots);
    bool rows = false;
    for (int32_t id : nodes) rows = rows || IsReduction(c_.nodes[id].kind);
    KernelGroup k;
    k.family = rows ? Family::kRowReduction : Family::kPointwise;
    k.nodes.assign(nodes.begin(), nodes.end());
    const std::set<int32_t> results(roots.begin(), roots.end());
    k.results.assign(results.begin(), results.end());
    const std::set<int32_t> read = StoredRead(k.nodes);
    if (rows) {
      // Stored results are per-row values of these rows (a norm's weight),
      // or the rows themselves (a loss's per-row terms, reduced again).
      std::vector<Dim> row_shape;
      for (int32_t id : k.nodes) {
        if (IsReduction(c_.nodes[id].kind)) row_shape = OperandShape(c_, id);
      }
      std::set<int32_t> rows_read, broadcast;
      for (int32_t id : read) (c_.nodes[id].type.shape == row_shape ? rows_read : broadcast).insert(id);
      const bool outer = std::any_of(p_.kernels.begin(), p_.kernels.end(),
                                     [](const KernelGroup& g) { return g.family == Family::kReduction; });
      k.reason = "row reductions fused with their element-wise neighbours";
      if (read.empty() && outer) absl::StrAppend(&k.reason, ", beside the reductions over outer axes");
      if (!rows_read.empty()) absl::StrAppend(&k.reason, ", reading ", Labels(rows_read), " from memory as its rows");
      if (!broadcast.empty()) {
        absl::StrAppend(&k.reason, rows_read.empty() ? ", reading " : " and ", Labels(broadcast),
                        " from memory, broadcast along rows");
      }
      KFUSE_RETURN_IF_ERROR(CheckRows(k));
    } else {
      KFUSE_RETURN_IF_ERROR(OutputsShareOneIterationSpace(c_, which));
      k.reason = read.empty() ? "element-wise outputs beside the reductions, in one pass"
                              : absl::StrCat("element-wise work after the reductions, reading ",
                                             Labels(read), " from memory, broadcast");
    }
    return k;
  }

  const Chain& c_;
  Partition p_;
  std::set<int32_t> stored_;  // Results earlier kernels store for later ones.
};

// How many operand shapes the chain's reductions have.
size_t RowShapes(const Chain& c) {
  std::set<std::vector<std::pair<int64_t, int32_t>>> shapes;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (!IsReduction(c.nodes[id].kind)) continue;
    std::vector<std::pair<int64_t, int32_t>> s;
    for (const Dim& d : OperandShape(c, id)) s.push_back({d.size, d.symbol});
    shapes.insert(std::move(s));
  }
  return shapes.size();
}

// Whether some reduction along rows reads the results of reductions over
// rows of another shape (a loss's mean over the batch of per-row values).
bool ReadsRowsOfAnotherShape(const Chain& c) {
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (IsReduction(c.nodes[id].kind) && AlongRows(c.nodes[id]) &&
        !RowResultsToStore(c, id, {}).empty()) {
      return true;
    }
  }
  return false;
}

// Beside reductions, layout views are computed by pointwise kernels (any
// view) and row kernels (an iota along their rows, reshapes of per-row
// values; AnalyzeRows checks them); the reduction family reads its operand
// as it is in memory.
absl::Status NoViewsInReductionKernels(const Chain& c, const Partition& p) {
  for (const KernelGroup& k : p.kernels) {
    if (k.family != Family::kReduction) continue;
    for (int32_t id : k.nodes) {
      if (IsLayout(c.nodes[id].kind)) {
        return absl::UnimplementedError(absl::StrCat(
            OpLabel(c, id), ": a view in the operand of a reduction over outer axes is not generated yet"));
      }
    }
  }
  return absl::OkStatus();
}

// PartitionChain for a chain that is not a fused attention.
absl::StatusOr<Partition> PartitionUnmatched(const Chain& c) {
  bool reduces = false, outer = false, multiplies = false, viewed = false;
  int32_t first_view = -1, first_iota = -1;
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    const Node& n = c.nodes[id];
    viewed = viewed || RowsTakeNo(c, id);
    if (n.kind == OpKind::kIota) {
      if (first_iota < 0) first_iota = id;
      if (first_view < 0) first_view = id;  // Index arithmetic, as views are.
      continue;
    }
    multiplies = multiplies || n.kind == OpKind::kMatmul;
    if (IsLayout(n.kind) && first_view < 0) first_view = id;
    if (!IsReduction(n.kind)) continue;
    reduces = true;
    const int rank = c.nodes[n.args[0]].type.rank();
    outer = outer || std::find(n.axes.begin(), n.axes.end(), rank - 1) == n.axes.end() ||
            n.axes.size() > 1;
  }
  if (first_iota >= 0 && multiplies) {
    // Beside products, iotas are generated inside attentions only.
    std::set<int32_t> attention;
    for (const KernelGroup& g : partition_internal::FindAttentions(c)) attention.insert(g.nodes.begin(), g.nodes.end());
    for (int32_t id = first_iota; id < static_cast<int32_t>(c.nodes.size()); ++id) {
      if (c.nodes[id].kind == OpKind::kIota && !attention.count(id)) {
        return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", NotYet(OpKind::kIota)));
      }
    }
  }
  if (multiplies) return partition_internal::MatmulPartition(c);
  // Beside reductions, row kernels take an iota along their rows and a
  // reshape adding or dropping a per-row value's unit dim (AnalyzeRows);
  // other views are left to pointwise kernels of a staged plan.
  if (reduces) {
    absl::StatusOr<Partition> p = outer || viewed || ReadsRowsOfAnotherShape(c) || RowShapes(c) > 1
                                      ? StagedPartition(c).Run()
                                      : RowPartition(c);
    if (p.ok()) KFUSE_RETURN_IF_ERROR(NoViewsInReductionKernels(c, *p));
    return p;
  }
  // Layout views join the element-wise chain as index arithmetic: each read
  // gets its own strides and offset, a concat picks a piece per element.
  KernelGroup k;
  k.family = Family::kPointwise;
  k.reason = first_view < 0 ? "element-wise chain fused into one pass"
                            : "element-wise chain with its layout views fused into one pass";
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    OpKind kind = c.nodes[id].kind;
    if (kind == OpKind::kInput || kind == OpKind::kConstant) continue;
    if (!IsElementwise(kind) && !IsLayout(kind)) {
      return absl::UnimplementedError(absl::StrCat(OpLabel(c, id), ": ", NotYet(kind)));
    }
    k.nodes.push_back(id);
  }
  if (k.nodes.empty()) {
    return absl::InvalidArgumentError(
        "outputs: every output is a chain input or a constant: there is nothing to compute");
  }
  {
    std::vector<size_t> all(c.outputs.size());
    for (size_t j = 0; j < all.size(); ++j) all[j] = j;
    const std::vector<OutputGroup> groups = OutputKernels(c, std::move(all));
    if (groups.size() > 1) {
      absl::StatusOr<Partition> apart = KernelPerOutputShape(c, groups);
      if (apart.ok() || !absl::IsUnimplemented(apart.status())) return apart;
    }
  }
  KFUSE_RETURN_IF_ERROR(OutputsShareOneIterationSpace(c));
  Partition p = OneKernel(c, std::move(k));
  // A reshape that is no view of its operand is refused here, naming it.
  if (first_view >= 0) KFUSE_RETURN_IF_ERROR(BuildIterSpace(c, p.kernels[0]).status());
  return p;
}

}  // namespace

absl::StatusOr<Partition> PartitionChain(const Chain& c) {
  std::optional<AttentionMatch> m = MatchAttention(c);
  if (!m) return PartitionUnmatched(c);
  Partition p;
  p.kernels.push_back(AttentionGroup(c, *m));
  // An attention the fused kernel does not take (a head dim past 256, say)
  // is still two products and a softmax: their kernels serve it when every
  // one of them generates; else both reasons are the answer.
  absl::Status fused = CanGenerateAttention(c, p.kernels[0], AttentionHeuristic(c, p.kernels[0]));
  if (fused.ok() || !absl::IsUnimplemented(fused)) return p;
  auto neither = [&](const absl::Status& apart) {
    return absl::UnimplementedError(absl::StrCat(fused.message(), "; nor as separate kernels: ", apart.message()));
  };
  absl::StatusOr<Partition> apart = PartitionUnmatched(c);
  if (!apart.ok()) return neither(apart.status());
  for (const KernelGroup& k : apart->kernels) {
    if (absl::Status s = CanGenerateFamily(c, k, FamilyHeuristic(c, k)); !s.ok()) return neither(s);
  }
  return apart;
}

DType IntermediateDType(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  const bool half = n.type.dtype == DType::kF16 || n.type.dtype == DType::kBF16;
  return half && IsReduction(n.kind) && !AlongRows(n) ? DType::kF32 : n.type.dtype;
}

std::vector<IntermediateBuffer> IntermediateBuffers(const Chain& c, const Partition& p) {
  std::vector<IntermediateBuffer> out;
  for (int32_t id : p.intermediates) {
    IntermediateBuffer b;
    b.dtype = IntermediateDType(c, id);
    for (const Dim& d : c.nodes[id].type.shape) {
      b.shape.push_back(d.is_static() ? SizeExpr::Const(d.size)
                                      : SizeExpr::Symbol(static_cast<uint32_t>(d.symbol)));
    }
    out.push_back(std::move(b));
  }
  return out;
}

std::string PartitionDigest(const Chain& c, const Partition& p) {
  // Numbers only (enum values, node ids, sizes, symbol indices), never
  // display names, so rewording a message re-keys nothing.
  std::string s = absl::StrCat("assembly ", kPlanAssemblyVersion, "\n");
  for (const KernelGroup& k : p.kernels) {
    absl::StrAppend(&s, "kernel ", static_cast<int>(k.family), " nodes ", absl::StrJoin(k.nodes, ","),
                    " results ", absl::StrJoin(k.results, ","), " intermediates ",
                    absl::StrJoin(k.intermediates, ","), "\n");
  }
  for (int32_t id : p.intermediates) {
    std::vector<std::string> shape;
    for (const Dim& d : c.nodes[id].type.shape) {
      shape.push_back(d.is_static() ? absl::StrCat(d.size) : absl::StrCat("s", d.symbol));
    }
    absl::StrAppend(&s, "buffer ", id, " ", static_cast<int>(IntermediateDType(c, id)), " ",
                    absl::StrJoin(shape, ","), "\n");
  }
  return Sha256Hex(s).substr(0, 16);
}

absl::Status NumberIntermediates(const Partition& p, KernelSpec* spec) {
  auto renumber = [&](BufferRef* b) -> absl::Status {
    if (b->kind != BufferRef::Kind::kIntermediate) return absl::OkStatus();
    auto it = std::find(p.intermediates.begin(), p.intermediates.end(),
                        static_cast<int32_t>(b->index));
    if (it == p.intermediates.end()) {
      return absl::InternalError(absl::StrCat("kernel ", spec->entry, " names node ", b->index,
                                              " as an intermediate; the partition does not"));
    }
    b->index = static_cast<uint32_t>(it - p.intermediates.begin());
    return absl::OkStatus();
  };
  for (KernelParam& k : spec->params) {
    if (k.kind == KernelParam::Kind::kBuffer) KFUSE_RETURN_IF_ERROR(renumber(&k.buffer));
    if (k.kind == KernelParam::Kind::kTensorMap) {
      KFUSE_RETURN_IF_ERROR(renumber(&k.tensor_map.buffer));
    }
  }
  for (Precondition& c : spec->preconditions) {
    if (c.kind == Precondition::Kind::kAligned || c.kind == Precondition::Kind::kContiguous) {
      BufferRef b = c.buffer;
      KFUSE_RETURN_IF_ERROR(renumber(&b));
      RenameBuffer(b, &c);
    }
  }
  return absl::OkStatus();
}

void RenameBuffer(const BufferRef& to, Precondition* c) {
  const auto label = [](const BufferRef& b) {
    const char* kind = b.kind == BufferRef::Kind::kInput    ? "input "
                       : b.kind == BufferRef::Kind::kOutput ? "output "
                                                            : "intermediate ";
    return absl::StrCat(kind, b.index, " ");
  };
  const std::string from = label(c->buffer);
  if (absl::StartsWith(c->description, from)) {
    c->description = absl::StrCat(label(to), c->description.substr(from.size()));
  }
  c->buffer = to;
}

}  // namespace kfuse
