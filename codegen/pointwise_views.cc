#include "codegen/pointwise_views.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/validate_internal.h"
#include "core/status.h"

namespace kfuse::pointwise_internal {
namespace {

constexpr size_t kMaxTerms = 4096;

// An index over the dims of some shape: offset + sum_d strides[d] * k_d.
struct Affine {
  Poly offset;
  std::vector<Mono> strides;
};

// One step from a value's own coordinates to its consumer's. An index over
// the value's coordinates becomes one over the consumer's.
struct Step {
  enum class Kind : uint8_t {
    kBroadcast,  // from -> to, right-aligned (expand, or an operand of a wider op).
    kSlice,      // Along axis: the value's k is the consumer's start + step * k.
    kPermute,    // The consumer's dim i is the value's perm[i].
    kReshape,    // from -> to, row-major.
    kShift,      // A concat piece: the value's k is the consumer's k - start along axis.
  };
  Kind kind = Kind::kBroadcast;
  int32_t node = -1;  // The op taking the step, for messages.
  std::vector<Dim> from, to;
  int64_t axis = 0, start = 0, step = 1;
  std::vector<int64_t> perm;
};

std::string DimsKey(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (const Dim& d : dims) {
    absl::StrAppend(&s, d.is_static() ? absl::StrCat(d.size) : absl::StrCat("s", d.symbol), ",");
  }
  return s + "]";
}

// Equal keys: equal effect on every index (the op is left out).
std::string Key(const Step& s) {
  switch (s.kind) {
    case Step::Kind::kBroadcast: return absl::StrCat("b", DimsKey(s.from), DimsKey(s.to));
    case Step::Kind::kSlice: return absl::StrCat("s", s.axis, ":", s.start, ":", s.step);
    case Step::Kind::kPermute: return absl::StrCat("p", absl::StrJoin(s.perm, ","));
    case Step::Kind::kReshape: return absl::StrCat("r", DimsKey(s.from), DimsKey(s.to));
    case Step::Kind::kShift: return absl::StrCat("h", s.axis, ":", s.start);
  }
  return "";
}

bool IsIdentity(const Step& s) {
  switch (s.kind) {
    case Step::Kind::kBroadcast:
    case Step::Kind::kReshape: return s.from == s.to;
    case Step::Kind::kPermute:
      for (size_t i = 0; i < s.perm.size(); ++i) {
        if (s.perm[i] != static_cast<int64_t>(i)) return false;
      }
      return true;
    case Step::Kind::kShift: return s.start == 0;
    case Step::Kind::kSlice: return false;  // Full slices are dropped where they are made.
  }
  return false;
}

// `s`, then the steps of `path`; broadcasts in a row become one, and so do
// reshapes (row-major both: a reshape of a reshape is one from the first's
// shape to the second's, so a merge a later reshape splits again, as a
// kernel iterating over the finer shape sees it, leaves no step).
std::vector<Step> Prepend(Step s, const std::vector<Step>& path) {
  if (IsIdentity(s)) return path;
  std::vector<Step> out;
  size_t rest = 0;
  if (!path.empty() && s.kind == path[0].kind &&
      (s.kind == Step::Kind::kBroadcast || s.kind == Step::Kind::kReshape)) {
    s.to = path[0].to;
    rest = 1;
  }
  if (!IsIdentity(s)) out.push_back(std::move(s));
  out.insert(out.end(), path.begin() + rest, path.end());
  return out;
}

std::string PathKey(const std::vector<Step>& path) {
  std::string k;
  for (const Step& s : path) absl::StrAppend(&k, Key(s), ";");
  return k;
}

std::string PolyKey(const Poly& p) {
  std::string k;
  for (const Mono& m : p) absl::StrAppend(&k, m.coef, "*", absl::StrJoin(m.syms, "*"), "+");
  return k;
}

std::string StridesKey(const std::vector<Mono>& st) {
  std::string k;
  for (const Mono& m : st) {
    absl::StrAppend(&k, m.coef, m.coef == 0 ? "" : absl::StrJoin(m.syms, "*"), ",");
  }
  return k;
}

bool HasZero(const std::vector<Dim>& dims) {
  return std::any_of(dims.begin(), dims.end(), [](const Dim& d) { return d == Dim::Static(0); });
}

// A reshape as strides: the dims of both shapes fall into groups of equal
// size (size-1 dims aside); a group is a view when its dims on the `from`
// side are evenly spaced (stride[k] == stride[k+1] * size[k+1]), and then the
// `to` side steps through it densely from its innermost stride.
absl::Status ApplyReshape(const Chain& c, const Step& s, const std::string& what, Affine* a) {
  std::vector<Mono> out(s.to.size(), Mono{0, {}});
  if (HasZero(s.from) || HasZero(s.to)) {  // No elements: nothing is read.
    a->strides = std::move(out);
    return absl::OkStatus();
  }
  std::vector<size_t> xs, ys;  // Dims other than size 1.
  for (size_t i = 0; i < s.from.size(); ++i) {
    if (s.from[i] != Dim::Static(1)) xs.push_back(i);
  }
  for (size_t j = 0; j < s.to.size(); ++j) {
    if (s.to[j] != Dim::Static(1)) ys.push_back(j);
  }
  size_t i = 0, j = 0;
  while (i < xs.size() || j < ys.size()) {
    if (i >= xs.size() || j >= ys.size()) {
      return absl::InternalError(absl::StrCat(OpLabel(c, s.node), ": element counts differ"));
    }
    size_t i1 = i + 1, j1 = j + 1;
    Mono px = Mono::Of(s.from[xs[i]]), py = Mono::Of(s.to[ys[j]]);
    while (px != py) {
      const bool more_x = i1 < xs.size(), more_y = j1 < ys.size();
      if (more_x && (IsMultipleOf(py, px) || !(more_y && IsMultipleOf(px, py)))) {
        px = px * Mono::Of(s.from[xs[i1++]]);
      } else if (more_y) {
        py = py * Mono::Of(s.to[ys[j1++]]);
      } else {
        return absl::InternalError(absl::StrCat(OpLabel(c, s.node), ": element counts differ"));
      }
    }
    for (size_t k = i; k + 1 < i1; ++k) {
      if (a->strides[xs[k]] != a->strides[xs[k + 1]] * Mono::Of(s.from[xs[k + 1]])) {
        return absl::UnimplementedError(absl::StrCat(
            OpLabel(c, s.node), ": reshape ", validate_internal::ShapeString(c, s.from), " to ",
            validate_internal::ShapeString(c, s.to),
            " is not a view of ", what, ": it merges dims ", xs[k], " and ", xs[k + 1],
            ", which are not evenly spaced there (a permute, slice, expand or concat before the "
            "reshape); only reshapes that merge or split evenly spaced dims are generated"));
      }
    }
    Mono st = a->strides[xs[i1 - 1]];
    for (size_t k = j1; k-- > j;) {
      out[ys[k]] = st;
      st = st * Mono::Of(s.to[ys[k]]);
    }
    i = i1;
    j = j1;
  }
  a->strides = std::move(out);
  return absl::OkStatus();
}

// `a`, an index over the coordinates before step `s`, over those after it.
// `what` names the indexed thing in messages.
absl::Status Apply(const Chain& c, const Step& s, const std::string& what, Affine* a) {
  switch (s.kind) {
    case Step::Kind::kBroadcast: {
      KFUSE_CHECK(a->strides.size() == s.from.size() && s.to.size() >= s.from.size());
      std::vector<Mono> st(s.to.size(), Mono{0, {}});
      const size_t lead = s.to.size() - s.from.size();
      for (size_t i = 0; i < s.from.size(); ++i) {
        if (s.from[i] == s.to[lead + i]) st[lead + i] = a->strides[i];
      }
      a->strides = std::move(st);
      return absl::OkStatus();
    }
    case Step::Kind::kSlice: {
      Mono& st = a->strides[s.axis];
      AddTo(&a->offset, Mono{s.start, {}} * st);
      st = st * Mono{s.step, {}};
      return absl::OkStatus();
    }
    case Step::Kind::kShift:
      AddTo(&a->offset, Mono{-s.start, {}} * a->strides[s.axis]);
      return absl::OkStatus();
    case Step::Kind::kPermute: {
      std::vector<Mono> st;
      for (int64_t p : s.perm) st.push_back(a->strides[p]);
      a->strides = std::move(st);
      return absl::OkStatus();
    }
    case Step::Kind::kReshape: return ApplyReshape(c, s, what, a);
  }
  return absl::OkStatus();
}

std::vector<Mono> DenseStrides(const std::vector<Dim>& shape) {
  std::vector<Mono> st(shape.size());
  Mono acc{1, {}};
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * Mono::Of(shape[i]);
  }
  return st;
}

class Resolver {
 public:
  Resolver(const Chain& c, const std::set<int32_t>& in_group) : c_(c), in_group_(in_group) {}

  // The term of node `id` seen through `path`, read under `guard`.
  absl::StatusOr<int32_t> Build(int32_t id, const std::vector<Step>& path,
                                const std::vector<int32_t>& guard) {
    const Node& n = c_.nodes[id];
    std::string key = n.kind == OpKind::kConstant
                          ? absl::StrCat(id)
                          : absl::StrCat(id, "|", PathKey(path), "|", absl::StrJoin(guard, ","));
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    if (prog_.terms.size() >= kMaxTerms) {
      return absl::UnimplementedError(absl::StrCat(OpLabel(c_, id),
                                                   ": its layout views need more than ", kMaxTerms,
                                                   " values per element in one pointwise kernel"));
    }
    KFUSE_ASSIGN_OR_RETURN(int32_t t, Make(id, path, guard));
    memo_.emplace(std::move(key), t);
    return t;
  }

  absl::StatusOr<int32_t> Root(int32_t id, const std::vector<Dim>& iter,
                               const std::vector<Dim>& over) {
    Step split;
    split.kind = Step::Kind::kReshape;
    split.node = id;
    split.from = iter;
    split.to = over;
    return Build(id, Prepend(Broadcast(id, c_.nodes[id].type.shape, iter), Prepend(split, {})), {});
  }

  ViewProgram Finish(std::vector<int32_t> roots) {
    // Loads by buffer, terms by node (stable: first use breaks ties).
    std::vector<int32_t> lo(prog_.loads.size());
    std::iota(lo.begin(), lo.end(), 0);
    auto rank = [](const Operand& o) {
      return std::pair<int, uint32_t>(o.buffer.kind == BufferRef::Kind::kInput ? 0 : 1,
                                      o.buffer.index);
    };
    std::stable_sort(lo.begin(), lo.end(), [&](int32_t a, int32_t b) {
      return rank(prog_.loads[a]) < rank(prog_.loads[b]);
    });
    std::vector<int32_t> load_at(lo.size()), term_at(prog_.terms.size());
    ViewProgram out;
    for (size_t i = 0; i < lo.size(); ++i) {
      load_at[lo[i]] = static_cast<int32_t>(i);
      out.loads.push_back(std::move(prog_.loads[lo[i]]));
    }
    std::vector<int32_t> to(prog_.terms.size());
    std::iota(to.begin(), to.end(), 0);
    std::stable_sort(to.begin(), to.end(), [&](int32_t a, int32_t b) {
      return prog_.terms[a].node < prog_.terms[b].node;
    });
    for (size_t i = 0; i < to.size(); ++i) term_at[to[i]] = static_cast<int32_t>(i);
    for (int32_t old : to) {
      Term t = std::move(prog_.terms[old]);
      if (t.kind == Term::Kind::kLoad) t.operand = load_at[t.operand];
      for (int32_t& a : t.args) a = term_at[a];
      out.terms.push_back(std::move(t));
    }
    for (int32_t& r : roots) r = term_at[r];
    out.roots = std::move(roots);
    out.conds = std::move(prog_.conds);
    out.computed.assign(computed_.begin(), computed_.end());
    return out;
  }

 private:
  Step Broadcast(int32_t node, const std::vector<Dim>& from, const std::vector<Dim>& to) {
    Step s;
    s.kind = Step::Kind::kBroadcast;
    s.node = node;
    s.from = from;
    s.to = to;
    return s;
  }

  int32_t AddTerm(Term t) {
    prog_.terms.push_back(std::move(t));
    return static_cast<int32_t>(prog_.terms.size() - 1);
  }

  absl::StatusOr<int32_t> Make(int32_t id, const std::vector<Step>& path,
                               const std::vector<int32_t>& guard) {
    const Node& n = c_.nodes[id];
    if (n.kind == OpKind::kInput || !in_group_.count(id)) return Load(id, path, guard);
    computed_.insert(id);
    Term t;
    t.node = id;
    if (IsElementwise(n.kind)) {
      for (int32_t a : n.args) {
        KFUSE_ASSIGN_OR_RETURN(
            int32_t ta,
            Build(a, Prepend(Broadcast(id, c_.nodes[a].type.shape, n.type.shape), path), guard));
        t.args.push_back(ta);
      }
      return AddTerm(std::move(t));
    }
    const std::vector<Dim>& in = n.args.empty() ? n.type.shape : c_.nodes[n.args[0]].type.shape;
    Step s;
    s.node = id;
    switch (n.kind) {
      case OpKind::kExpand:
        return Build(n.args[0], Prepend(Broadcast(id, in, n.type.shape), path), guard);
      case OpKind::kSlice: {
        s.kind = Step::Kind::kSlice;
        s.axis = n.axis;
        s.start = n.start;
        // One element taken: its step does not matter (and a huge one would
        // overflow the stride).
        s.step = n.type.shape[n.axis] == Dim::Static(1) ? 1 : n.step;
        if (n.start == 0 && n.step == 1 && in[n.axis] == n.type.shape[n.axis]) {
          return Build(n.args[0], path, guard);
        }
        return Build(n.args[0], Prepend(std::move(s), path), guard);
      }
      case OpKind::kPermute:
        s.kind = Step::Kind::kPermute;
        s.perm = n.axes;
        return Build(n.args[0], Prepend(std::move(s), path), guard);
      case OpKind::kReshape:
        s.kind = Step::Kind::kReshape;
        s.from = in;
        s.to = n.type.shape;
        return Build(n.args[0], Prepend(std::move(s), path), guard);
      case OpKind::kConcat: return Concat(id, path, guard);
      case OpKind::kIota: return Iota(id, path);
      default:
        return absl::UnimplementedError(absl::StrCat("node ", id, ": ", std::string(OpName(n.kind)),
                                                     " is not supported by pointwise kernels"));
    }
  }

  // A read of node `id`'s buffer: a chain input with its strides, or a dense
  // intermediate.
  absl::StatusOr<int32_t> Load(int32_t id, const std::vector<Step>& path,
                               const std::vector<int32_t>& guard) {
    const Node& n = c_.nodes[id];
    Operand o;
    o.node = id;
    o.dtype = n.type.dtype;
    Affine a;
    std::string what;
    if (n.kind == OpKind::kInput) {
      o.buffer = BufferRef{BufferRef::Kind::kInput, static_cast<uint32_t>(n.input_index)};
      what = absl::StrCat("input ", n.input_index);
      if (n.strides.empty()) {
        a.strides = DenseStrides(n.type.shape);
      } else {
        for (int64_t s : n.strides) a.strides.push_back(Mono{s, {}});
      }
    } else {
      o.buffer = BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(id)};
      o.dtype = IntermediateDType(c_, id);  // Its buffer's type.
      what = absl::StrCat("the result of ", OpLabel(c_, id));
      a.strides = DenseStrides(n.type.shape);
    }
    for (const Step& s : path) KFUSE_RETURN_IF_ERROR(Apply(c_, s, what, &a));
    o.strides = std::move(a.strides);
    o.offset = std::move(a.offset);
    o.guard = guard;
    const std::string key =
        absl::StrCat(o.buffer.kind == BufferRef::Kind::kInput ? "i" : "m", o.buffer.index, "|",
                     StridesKey(o.strides), "|", PolyKey(o.offset), "|", absl::StrJoin(guard, ","));
    auto [it, added] = load_index_.emplace(key, static_cast<int32_t>(prog_.loads.size()));
    if (added) prog_.loads.push_back(std::move(o));
    Term t;
    t.kind = Term::Kind::kLoad;
    t.node = id;
    t.operand = it->second;
    return AddTerm(std::move(t));
  }

  // An iota's value: its coordinate along its axis, through the views
  // between it and the element (as a concat's piece is chosen).
  absl::StatusOr<int32_t> Iota(int32_t id, const std::vector<Step>& path) {
    const Node& n = c_.nodes[id];
    Cond cd;
    cd.node = id;
    cd.coordinate = true;
    Affine a;
    a.strides.assign(n.type.shape.size(), Mono{0, {}});
    a.strides[n.axis] = Mono{1, {}};
    const std::string what = OpLabel(c_, id);
    for (const Step& s : path) KFUSE_RETURN_IF_ERROR(Apply(c_, s, what, &a));
    cd.strides = std::move(a.strides);
    cd.offset = std::move(a.offset);
    const std::string key = absl::StrCat("iota|", StridesKey(cd.strides), "|", PolyKey(cd.offset));
    auto [it, added] = cond_index_.emplace(key, static_cast<int32_t>(prog_.conds.size()));
    if (added) prog_.conds.push_back(std::move(cd));
    Term t;
    t.kind = Term::Kind::kIota;
    t.node = id;
    t.conds = {it->second};
    return AddTerm(std::move(t));
  }

  // A select between the pieces, each read shifted to its place along the
  // axis and only where its cond holds.
  absl::StatusOr<int32_t> Concat(int32_t id, const std::vector<Step>& path,
                                 const std::vector<int32_t>& guard) {
    const Node& n = c_.nodes[id];
    if (n.args.size() == 1) return Build(n.args[0], path, guard);
    Term t;
    t.kind = Term::Kind::kSelect;
    t.node = id;
    int64_t off = 0;
    for (size_t j = 0; j < n.args.size(); ++j) {
      const int64_t width = c_.nodes[n.args[j]].type.shape[n.axis].size;
      Cond cd;
      cd.node = id;
      cd.has_lo = j > 0;
      cd.lo = off;
      cd.has_hi = j + 1 < n.args.size();
      cd.hi = off + width;
      Affine a;
      a.strides.assign(n.type.shape.size(), Mono{0, {}});
      a.strides[n.axis] = Mono{1, {}};
      const std::string what = absl::StrCat("the pieces of ", OpLabel(c_, id));
      for (const Step& s : path) KFUSE_RETURN_IF_ERROR(Apply(c_, s, what, &a));
      cd.strides = std::move(a.strides);
      cd.offset = std::move(a.offset);
      const std::string key = absl::StrCat(StridesKey(cd.strides), "|", PolyKey(cd.offset), "|",
                                           cd.has_lo ? cd.lo : -1, "|", cd.has_hi ? cd.hi : -1);
      auto [it, added] = cond_index_.emplace(key, static_cast<int32_t>(prog_.conds.size()));
      if (added) prog_.conds.push_back(std::move(cd));
      std::vector<int32_t> g = guard;
      g.push_back(it->second);
      std::sort(g.begin(), g.end());
      g.erase(std::unique(g.begin(), g.end()), g.end());
      Step shift;
      shift.kind = Step::Kind::kShift;
      shift.node = id;
      shift.axis = n.axis;
      shift.start = off;
      KFUSE_ASSIGN_OR_RETURN(int32_t tp, Build(n.args[j], Prepend(std::move(shift), path), g));
      t.args.push_back(tp);
      if (j + 1 < n.args.size()) t.conds.push_back(it->second);
      off += width;
    }
    return AddTerm(std::move(t));
  }

  const Chain& c_;
  const std::set<int32_t>& in_group_;
  ViewProgram prog_;
  std::set<int32_t> computed_;
  std::map<std::string, int32_t> memo_, load_index_, cond_index_;
};

}  // namespace

absl::StatusOr<ViewProgram> ResolveViews(const Chain& chain, const std::set<int32_t>& in_group,
                                         const std::vector<int32_t>& roots,
                                         const std::vector<Dim>& iter,
                                         const std::vector<Dim>& over) {
  Resolver r(chain, in_group);
  std::vector<int32_t> terms;
  for (int32_t id : roots) {
    KFUSE_ASSIGN_OR_RETURN(int32_t t, r.Root(id, iter, over));
    terms.push_back(t);
  }
  return r.Finish(std::move(terms));
}

absl::StatusOr<std::vector<Mono>> ReshapeStrides(const Chain& chain, int32_t node,
                                                 const std::vector<Dim>& from,
                                                 const std::vector<Dim>& to,
                                                 std::vector<Mono> strides) {
  Step s;
  s.kind = Step::Kind::kReshape;
  s.node = node;
  s.from = from;
  s.to = to;
  Affine a;
  a.strides = std::move(strides);
  if (!IsIdentity(s)) {
    KFUSE_RETURN_IF_ERROR(ApplyReshape(chain, s, absl::StrCat("the result of ", OpLabel(chain, node)), &a));
  }
  return a.strides;
}

}  // namespace kfuse::pointwise_internal
