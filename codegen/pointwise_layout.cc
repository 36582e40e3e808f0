#include "codegen/pointwise_layout.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "codegen/pointwise_views.h"
#include "codegen/validate.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse {

Mono Mono::Of(const Dim& d) {
  if (d.is_static()) return Mono{d.size, {}};
  return Mono{1, {d.symbol}};
}

SizeExpr Mono::ToExpr() const {
  SizeExpr e = SizeExpr::Const(coef);
  if (coef == 0) return e;
  bool first = coef == 1;
  for (int32_t s : syms) {
    SizeExpr sym = SizeExpr::Symbol(static_cast<uint32_t>(s));
    e = first ? sym : SizeExpr::Mul(e, sym);
    first = false;
  }
  return e;
}

Mono operator*(const Mono& a, const Mono& b) {
  Mono m;
  m.coef = a.coef * b.coef;
  if (m.coef == 0) return m;
  m.syms = a.syms;
  m.syms.insert(m.syms.end(), b.syms.begin(), b.syms.end());
  std::sort(m.syms.begin(), m.syms.end());
  return m;
}

bool IsMultipleOf(const Mono& a, const Mono& b) {
  if (a.coef == 0) return true;
  if (b.coef == 0 || a.coef % b.coef != 0) return false;
  return std::includes(a.syms.begin(), a.syms.end(), b.syms.begin(), b.syms.end());
}

int64_t UpperBound(const Mono& m, const Chain& chain) {
  int64_t v = m.coef < 0 ? -m.coef : m.coef;
  for (int32_t s : m.syms) {
    int64_t max = chain.symbols[s].max;
    if (max <= 0) return -1;
    if (v != 0 && max > (int64_t{1} << 62) / v) return -1;
    v *= max;
  }
  return v;
}

void AddTo(Poly* p, const Mono& m) {
  if (m.is_zero()) return;
  auto it = std::find_if(p->begin(), p->end(), [&](const Mono& t) { return t.syms == m.syms; });
  if (it == p->end()) {
    p->push_back(m);
    std::sort(p->begin(), p->end(), [](const Mono& a, const Mono& b) { return a.syms < b.syms; });
    return;
  }
  it->coef += m.coef;
  if (it->coef == 0) p->erase(it);
}

bool IterSpace::needs_coords() const {
  for (const auto* ops : {&inputs, &outputs}) {
    for (const Operand& o : *ops) {
      if (!o.dense && !o.uniform) return true;
    }
  }
  for (const Cond& c : conds) {
    if (!c.dense && !c.uniform) return true;
  }
  return false;
}

namespace {

std::vector<Mono> DenseStrides(const std::vector<Mono>& sizes) {
  std::vector<Mono> st(sizes.size());
  Mono acc{1, {}};
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * sizes[i];
  }
  return st;
}

// numpy broadcasting; false when the shapes do not broadcast.
bool BroadcastInto(const std::vector<Dim>& a, std::vector<Dim>* acc) {
  return validate_internal::Broadcast(a, *acc, acc);
}

// The strides of a value of `shape` with element strides `own` over the
// iteration shape `iter` (right-aligned; broadcast dims get stride 0).
absl::StatusOr<std::vector<Mono>> StridesOver(const std::vector<Dim>& shape,
                                              const std::vector<Mono>& own,
                                              const std::vector<Dim>& iter, int32_t node) {
  const size_t r = iter.size();
  if (shape.size() > r) {
    return absl::InternalError(absl::StrCat("node ", node, " has a higher rank than its kernel"));
  }
  std::vector<Mono> st(r, Mono{0, {}});
  for (size_t i = r - shape.size(); i < r; ++i) {
    const Dim& d = shape[i - (r - shape.size())];
    if (d == iter[i]) {
      st[i] = own[i - (r - shape.size())];
    } else if (d != Dim::Static(1)) {
      return absl::InternalError(
          absl::StrCat("node ", node, " does not broadcast to its kernel's shape"));
    }
  }
  return st;
}

struct Resolved {
  pointwise_internal::ViewProgram program;
  std::vector<Operand> outputs;  // Strides over `over`'s dims.
};

// The view program of `roots` over the iteration shape `over` (`iter`, the
// writes' broadcast shape, or `iter` with dims split) and the writes'
// strides over it.
absl::StatusOr<Resolved> Resolve(const Chain& chain, const std::set<int32_t>& in_group,
                                 const std::vector<std::pair<BufferRef, int32_t>>& writes,
                                 const std::vector<int32_t>& roots, const std::vector<Dim>& iter,
                                 const std::vector<Dim>& over) {
  Resolved r;
  KFUSE_ASSIGN_OR_RETURN(r.program,
                         pointwise_internal::ResolveViews(chain, in_group, roots, iter, over));
  for (const auto& w : writes) {
    Operand o;
    o.buffer = w.first;
    o.node = w.second;
    o.dtype = chain.nodes[w.second].type.dtype;
    const std::vector<Dim>& shape = chain.nodes[w.second].type.shape;
    std::vector<Mono> own;
    for (const Dim& d : shape) own.push_back(Mono::Of(d));
    KFUSE_ASSIGN_OR_RETURN(std::vector<Mono> st, StridesOver(shape, DenseStrides(own), iter, w.second));
    KFUSE_ASSIGN_OR_RETURN(o.strides, pointwise_internal::ReshapeStrides(chain, w.second, iter, over,
                                                                         std::move(st)));
    r.outputs.push_back(std::move(o));
  }
  return r;
}

// The coarsest shape both static shapes `a` and `b` (equal element counts)
// are row-major merges of: [320, 64, 64] and [32, 40960] give [32, 10, 64,
// 64]. Unit dims are left out; nothing where a dim is symbolic or none
// exists (a dim of one not dividing the other's).
std::optional<std::vector<Dim>> CommonRefinement(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  auto sizes = [](const std::vector<Dim>& shape) -> std::optional<std::vector<int64_t>> {
    std::vector<int64_t> out;
    for (const Dim& d : shape) {
      if (!d.is_static()) return std::nullopt;
      if (d.size != 1) out.push_back(d.size);
    }
    return out;
  };
  const std::optional<std::vector<int64_t>> sx = sizes(a), sy = sizes(b);
  if (!sx || !sy) return std::nullopt;
  const std::vector<int64_t>& x = *sx;
  const std::vector<int64_t>& y = *sy;
  std::vector<Dim> refined;
  size_t i = 0, j = 0;
  int64_t p = x.empty() ? 1 : x[0], q = y.empty() ? 1 : y[0];
  while (i < x.size() && j < y.size()) {
    const int64_t m = std::min(p, q);
    if (p % m != 0 || q % m != 0) return std::nullopt;
    refined.push_back(Dim::Static(m));
    p /= m;
    q /= m;
    if (p == 1 && ++i < x.size()) p = x[i];
    if (q == 1 && ++j < y.size()) q = y[j];
  }
  if (i != x.size() || j != y.size()) return std::nullopt;
  return refined;
}

// Where node `id` is a reshape whose result's shape ends `iter`: `iter`
// with those trailing dims split as finely as the reshape's result and its
// operand both need (so both are splits of it). Else nothing.
std::optional<std::vector<Dim>> Refined(const Chain& chain, int32_t id,
                                        const std::vector<Dim>& iter) {
  const Node& n = chain.nodes[id];
  if (n.kind != OpKind::kReshape || n.args.size() != 1) return std::nullopt;
  const std::vector<Dim>& from = chain.nodes[n.args[0]].type.shape;
  const std::vector<Dim>& to = n.type.shape;
  if (from == to || to.size() > iter.size() ||
      !std::equal(to.begin(), to.end(), iter.end() - static_cast<std::ptrdiff_t>(to.size()))) {
    return std::nullopt;
  }
  std::vector<Dim> over(iter.begin(), iter.end() - static_cast<std::ptrdiff_t>(to.size()));
  std::optional<std::vector<Dim>> both = CommonRefinement(to, from);
  over.insert(over.end(), both ? both->begin() : from.begin(), both ? both->end() : from.end());
  return over;
}

}  // namespace

absl::StatusOr<IterSpace> BuildIterSpace(const Chain& chain, const KernelGroup& group) {
  const int32_t num_nodes = static_cast<int32_t>(chain.nodes.size());
  if (group.nodes.empty()) return absl::InvalidArgumentError("empty kernel group");
  std::set<int32_t> in_group;
  for (int32_t id : group.nodes) {
    if (id < 0 || id >= num_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("kernel group refers to no node ", id));
    }
    in_group.insert(id);
  }
  for (int32_t id : group.results) {
    if (id < 0 || id >= num_nodes) {
      return absl::InvalidArgumentError(absl::StrCat("kernel group refers to no node ", id));
    }
    in_group.insert(id);
  }
  const std::set<int32_t> listed = in_group;
  // Constants are computed where they are used, listed or not.
  for (int32_t id = 0; id < num_nodes; ++id) {
    if (chain.nodes[id].kind == OpKind::kConstant) in_group.insert(id);
  }
  auto is_input = [&](int32_t id) { return chain.nodes[id].kind == OpKind::kInput; };

  // What the kernel writes: chain outputs it holds, then values other
  // kernels consume. A group that lists its results writes those outputs
  // only: a node it recomputes may be an output another kernel writes.
  const std::set<int32_t> results(group.results.begin(), group.results.end());
  std::vector<std::pair<BufferRef, int32_t>> writes;
  for (size_t j = 0; j < chain.outputs.size(); ++j) {
    if ((results.empty() ? listed : results).count(chain.outputs[j])) {
      writes.push_back({BufferRef{BufferRef::Kind::kOutput, static_cast<uint32_t>(j)},
                        chain.outputs[j]});
    }
  }
  std::set<int32_t> consumed_outside;
  for (int32_t id = 0; id < num_nodes; ++id) {
    if (in_group.count(id)) continue;
    for (int32_t a : chain.nodes[id].args) {
      if (in_group.count(a) && !is_input(a) && chain.nodes[a].kind != OpKind::kConstant) {
        consumed_outside.insert(a);
      }
    }
  }
  for (int32_t id : consumed_outside) {
    writes.push_back({BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)}, id});
  }
  if (writes.empty()) return absl::InvalidArgumentError("kernel group writes nothing");

  std::vector<Dim> iter;
  for (const auto& w : writes) {
    if (!BroadcastInto(chain.nodes[w.second].type.shape, &iter)) {
      return absl::InternalError("kernel group outputs do not broadcast together");
    }
  }
  // The partitioner keeps outputs' broadcasts within the element limit;
  // past it the strides' products below would overflow.
  const int64_t limit = Limits{}.max_elements;
  if (CountElements(chain, iter, limit) > limit) {
    return absl::InternalError(
        absl::StrCat("kernel group iterates over more than ", limit, " elements"));
  }

  // Every value the outputs need, with the views pushed down to the reads.
  std::vector<int32_t> roots;
  for (const auto& w : writes) roots.push_back(w.second);
  absl::StatusOr<Resolved> resolved = Resolve(chain, in_group, writes, roots, iter, iter);
  // A reshape that merges dims no view can merge (a concat's axis into its
  // neighbour: stack(...).flatten(-2)): iterate over its finer shape.
  for (int32_t id : in_group) {
    if (resolved.ok() || resolved.status().code() != absl::StatusCode::kUnimplemented) break;
    std::optional<std::vector<Dim>> over = Refined(chain, id, iter);
    if (!over.has_value()) continue;
    absl::StatusOr<Resolved> finer = Resolve(chain, in_group, writes, roots, iter, *over);
    if (finer.ok()) {
      resolved = std::move(finer);
      iter = *std::move(over);
    }
  }
  if (!resolved.ok()) return resolved.status();
  pointwise_internal::ViewProgram& prog = resolved->program;
  IterSpace space;
  space.compute = std::move(prog.computed);
  space.inputs = std::move(prog.loads);
  space.conds = std::move(prog.conds);
  space.terms = std::move(prog.terms);
  space.results = std::move(prog.roots);
  space.outputs = std::move(resolved->outputs);

  // Drop size-1 dims, then merge each dim into its inner neighbour where
  // every operand and cond steps through both as through one.
  std::vector<std::vector<Mono>*> all;
  for (Operand& o : space.inputs) all.push_back(&o.strides);
  for (Operand& o : space.outputs) all.push_back(&o.strides);
  for (Cond& c : space.conds) all.push_back(&c.strides);
  std::vector<Mono> sizes;
  std::vector<std::vector<Mono>> strides(all.size());
  for (size_t i = iter.size(); i-- > 0;) {
    if (iter[i] == Dim::Static(1)) continue;
    Mono size = Mono::Of(iter[i]);
    bool merge = !sizes.empty();
    for (size_t k = 0; k < all.size() && merge; ++k) {
      merge = (*all[k])[i] == strides[k].back() * sizes.back();
    }
    if (merge) {
      sizes.back() = size * sizes.back();
      continue;
    }
    sizes.push_back(size);
    for (size_t k = 0; k < all.size(); ++k) strides[k].push_back((*all[k])[i]);
  }
  if (sizes.empty()) {
    sizes.push_back(Mono{1, {}});
    for (auto& st : strides) st.push_back(Mono{0, {}});
  }
  std::reverse(sizes.begin(), sizes.end());
  const std::vector<Mono> dense = DenseStrides(sizes);
  std::set<int32_t> syms;
  auto flags = [&](const std::vector<Mono>& st, const Poly& offset, bool* is_dense,
                   bool* is_uniform) {
    *is_dense = st == dense;
    *is_uniform =
        std::all_of(st.begin(), st.end(), [](const Mono& m) { return m.is_zero(); });
    for (const Mono& m : st) syms.insert(m.syms.begin(), m.syms.end());
    for (const Mono& m : offset) syms.insert(m.syms.begin(), m.syms.end());
  };
  for (size_t k = 0; k < all.size(); ++k) {
    std::reverse(strides[k].begin(), strides[k].end());
    *all[k] = std::move(strides[k]);
  }
  for (auto* ops : {&space.inputs, &space.outputs}) {
    for (Operand& o : *ops) flags(o.strides, o.offset, &o.dense, &o.uniform);
  }
  for (Cond& c : space.conds) flags(c.strides, c.offset, &c.dense, &c.uniform);
  space.numel = Mono{1, {}};
  for (const Mono& m : sizes) {
    space.numel = space.numel * m;
    syms.insert(m.syms.begin(), m.syms.end());
  }
  space.sizes = std::move(sizes);
  space.symbols.assign(syms.begin(), syms.end());
  return space;
}

}  // namespace kfuse
