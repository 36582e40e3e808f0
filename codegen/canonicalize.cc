#include "codegen/canonicalize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/scalar_eval.h"
#include "codegen/validate.h"
#include "core/key.h"
#include "core/status.h"

namespace kfuse {
namespace {

// Bumped whenever the serialisation below changes meaning.
constexpr char kHashVersion[] = "kfuse-chain-v1";

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// `tags`: how to write each symbol (nullptr: by its number).
void AppendDims(const std::vector<Dim>& dims, std::string* out,
                const std::vector<std::string>* tags = nullptr) {
  absl::StrAppend(out, "[");
  for (const Dim& d : dims) {
    if (d.is_static()) {
      absl::StrAppend(out, d.size, ",");
    } else if (tags != nullptr) {
      absl::StrAppend(out, (*tags)[d.symbol], ",");
    } else {
      absl::StrAppend(out, "s", d.symbol, ",");
    }
  }
  absl::StrAppend(out, "]");
}

void AppendInts(const std::vector<int64_t>& v, std::string* out) {
  absl::StrAppend(out, "[");
  for (int64_t x : v) absl::StrAppend(out, x, ",");
  absl::StrAppend(out, "]");
}

// The node without its operands: the kind, the type and the attributes the
// kind reads. Equal strings mean equal nodes given equal operands. Symbols
// are written by number, or as `tags` says.
std::string NodeBody(const Node& n, const std::vector<std::string>* tags = nullptr) {
  std::string s = absl::StrCat(static_cast<int>(n.kind), ":", static_cast<int>(n.type.dtype));
  AppendDims(n.type.shape, &s, tags);
  switch (n.kind) {
    case OpKind::kInput:
      absl::StrAppend(&s, "#", n.input_index);
      AppendInts(n.strides, &s);
      break;
    case OpKind::kConstant:
      absl::StrAppend(&s, "d", static_cast<int>(n.dtype), "v", absl::Hex(Bits(n.value)));
      break;
    case OpKind::kCast:
      absl::StrAppend(&s, "d", static_cast<int>(n.dtype));
      break;
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceMean:
      AppendInts(n.axes, &s);
      absl::StrAppend(&s, n.keepdim ? "k" : "");
      break;
    case OpKind::kPermute:
      AppendInts(n.axes, &s);
      break;
    case OpKind::kReshape:
    case OpKind::kExpand:
      AppendDims(n.shape, &s, tags);
      break;
    case OpKind::kIota:
      AppendDims(n.shape, &s, tags);
      absl::StrAppend(&s, "a", n.axis, "d", static_cast<int>(n.dtype));
      break;
    case OpKind::kSlice:
      absl::StrAppend(&s, "a", n.axis, ":", n.start, ":", n.stop, ":", n.step);
      break;
    case OpKind::kConcat:
      absl::StrAppend(&s, "a", n.axis);
      break;
    default:
      break;
  }
  return s;
}

// Explicit strides that say what empty strides say (dense row-major).
bool IsDense(const Node& n) {
  if (n.strides.size() != n.type.shape.size()) return false;
  int64_t expect = 1;
  for (size_t i = n.strides.size(); i-- > 0;) {
    const Dim& d = n.type.shape[i];
    if (!d.is_static() || n.strides[i] != expect) return false;
    expect *= d.size;
  }
  return true;
}

// A copy holding only what the kind reads, so stale fields cannot split keys.
Node Clean(const Node& n) {
  Node m;
  m.kind = n.kind;
  m.args = n.args;
  m.type = n.type;
  m.wire_index = n.wire_index;
  switch (n.kind) {
    case OpKind::kInput:
      m.input_index = n.input_index;
      m.strides = n.strides;
      if (IsDense(n)) m.strides.clear();
      break;
    case OpKind::kConstant:
      m.dtype = n.dtype;
      m.value = std::isnan(n.value) ? std::numeric_limits<double>::quiet_NaN() : n.value;
      break;
    case OpKind::kCast:
      m.dtype = n.dtype;
      break;
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMin:
    case OpKind::kReduceMean:
      m.axes = n.axes;
      m.keepdim = n.keepdim;
      break;
    case OpKind::kPermute:
      m.axes = n.axes;
      break;
    case OpKind::kReshape:
    case OpKind::kExpand:
      m.shape = n.shape;
      break;
    case OpKind::kIota:
      m.shape = n.shape;
      m.axis = n.axis;
      m.dtype = n.dtype;
      break;
    case OpKind::kSlice:
      m.axis = n.axis;
      m.start = n.start;
      m.stop = n.stop;
      m.step = n.step;
      break;
    case OpKind::kConcat:
      m.axis = n.axis;
      break;
    default:
      break;
  }
  return m;
}

// FNV-1a: a stable 64-bit structural hash (only orders operands; equality is
// always decided on exact keys).
uint64_t Fnv(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

void PostOrder(const std::vector<Node>& nodes, int32_t id, std::vector<bool>* seen,
               std::vector<int32_t>* order) {
  if ((*seen)[id]) return;
  (*seen)[id] = true;
  for (int32_t a : nodes[id].args) PostOrder(nodes, a, seen, order);
  order->push_back(id);
}

// Each symbol as the structural hash writes it, the same in a chain and in
// its canonical form (where symbols are renumbered by first use) and
// whatever the client named it: its number in the order the inputs' dims
// first use them (which the canonical numbering starts with, inputs being
// its first nodes), else its max (a symbol only an op's shape names). By
// its number in the chain, a symbol renumbered could reorder commutative
// operands a second time.
std::vector<std::string> SymbolTags(const Chain& c) {
  std::vector<std::string> tags(c.symbols.size());
  int next = 0;
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    for (const Dim& dim : n.type.shape) {
      if (!dim.is_static() && tags[dim.symbol].empty()) tags[dim.symbol] = absl::StrCat("s", next++);
    }
  }
  for (size_t i = 0; i < tags.size(); ++i) {
    if (tags[i].empty()) tags[i] = absl::StrCat("max", c.symbols[i].max);
  }
  return tags;
}

// A reduction over the innermost axis and outer axes together.
bool Mixed(const Chain& c, int32_t id) {
  const Node& n = c.nodes[id];
  if (!IsReduction(n.kind) || n.axes.size() < 2) return false;
  const int64_t last = c.nodes[n.args[0]].type.rank() - 1;
  return std::find(n.axes.begin(), n.axes.end(), last) != n.axes.end();
}

bool HasMixed(const Chain& c) {
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    if (Mixed(c, id)) return true;
  }
  return false;
}

// One round of splitting every mixed reduction into one along rows, then
// one over the outer axes of its per-row results (which is mixed again
// without keepdim when those axes include the next innermost: the next
// round splits it). 16-bit sums and means are taken in f32 between the two
// and rounded once at the end, as eager PyTorch accumulates them. The new
// nodes carry the reduction's wire index, so messages name the client's op.
// nullopt if the split chain does not validate (no case is known: the
// reduction is then left whole, for the partitioner to refuse by name).
std::optional<Chain> SplitMixedReductions(const Chain& c) {
  Chain out = c;
  out.nodes.clear();
  std::vector<int32_t> to(c.nodes.size(), -1);
  auto add = [&](Node m) {
    // A weak scalar keeps its type, which is what tells a weak float (2.0)
    // from a weak int (2): validated afresh, a whole one would become an int.
    const DType weak = m.kind == OpKind::kConstant && m.dtype == DType::kInvalid ? m.type.dtype : DType::kInvalid;
    m.type = TensorType{};
    m.type.dtype = weak;
    out.nodes.push_back(std::move(m));
    return static_cast<int32_t>(out.nodes.size() - 1);
  };
  for (int32_t id = 0; id < static_cast<int32_t>(c.nodes.size()); ++id) {
    Node m = c.nodes[id];
    for (int32_t& a : m.args) a = to[a];
    if (!Mixed(c, id)) {
      if (m.kind == OpKind::kInput) {
        out.nodes.push_back(std::move(m));
        to[id] = static_cast<int32_t>(out.nodes.size() - 1);
      } else {
        to[id] = add(std::move(m));
      }
      continue;
    }
    const DType t = m.type.dtype;
    const bool widen = (m.kind == OpKind::kReduceSum || m.kind == OpKind::kReduceMean) &&
                       (t == DType::kF16 || t == DType::kBF16);
    int32_t x = m.args[0];
    Node step;
    step.wire_index = m.wire_index;
    if (widen) {
      step.kind = OpKind::kCast;
      step.dtype = DType::kF32;
      step.args = {x};
      x = add(step);
    }
    step = Node{};
    step.wire_index = m.wire_index;
    step.kind = m.kind;
    step.args = {x};
    step.axes = {m.axes.back()};  // Sorted by validation: the innermost.
    step.keepdim = m.keepdim;
    Node rest = step;
    rest.args = {add(step)};
    rest.axes.assign(m.axes.begin(), m.axes.end() - 1);
    int32_t r = add(rest);
    if (widen) {
      step = Node{};
      step.wire_index = m.wire_index;
      step.kind = OpKind::kCast;
      step.dtype = t;
      step.args = {r};
      r = add(step);
    }
    to[id] = r;
  }
  for (int32_t& o : out.outputs) o = to[o];
  Limits room;
  room.max_ops = std::numeric_limits<int>::max();  // The client's chain passed the limit.
  absl::StatusOr<Chain> v = Validate(std::move(out), room);
  if (!v.ok()) return std::nullopt;
  return *std::move(v);
}

}  // namespace

namespace {

// `m` into `tmp` unless an equal node is there (same body and operands);
// its id either way.
int32_t Add(Node m, const std::vector<std::string>& tags, Chain* tmp, std::vector<uint64_t>* shash,
            std::map<std::string, int32_t>* seen) {
  std::string key = NodeBody(m);
  std::string hkey = NodeBody(m, &tags);
  for (int32_t a : m.args) {
    absl::StrAppend(&key, ",%", a);
    absl::StrAppend(&hkey, ",", absl::Hex((*shash)[a]));
  }
  auto [it, inserted] = seen->emplace(key, static_cast<int32_t>(tmp->nodes.size()));
  if (inserted) {
    tmp->nodes.push_back(std::move(m));
    shash->push_back(Fnv(hkey));
  }
  return it->second;
}

// For a matmul `m` over nodes of `tmp` whose operands are both reshapes
// that keep their operands' last two dims, of operands whose batch dims
// hold as many elements: the matmul of those operands (its batch dims the
// first's; the second reshaped to them where its own differ, as repeated
// grouped-query heads [Hkv, G] are to [H]), added to `tmp` as Add does.
// The original is that product reshaped to its shape. nullopt otherwise.
std::optional<int32_t> UnmergedProduct(const Node& m, const std::vector<std::string>& tags, Chain* tmp,
                                       std::vector<uint64_t>* shash, std::map<std::string, int32_t>* seen) {
  if (m.kind != OpKind::kMatmul) return std::nullopt;
  std::vector<int32_t> from;
  std::vector<std::vector<Dim>> batch;
  for (int i = 0; i < 2; ++i) {
    const Node& r = tmp->nodes[m.args[i]];
    if (r.kind != OpKind::kReshape) return std::nullopt;
    const std::vector<Dim>& to = r.type.shape;
    const std::vector<Dim>& in = tmp->nodes[r.args[0]].type.shape;
    if (in.size() < 2 || !std::equal(to.end() - 2, to.end(), in.end() - 2)) return std::nullopt;
    batch.emplace_back(in.begin(), in.end() - 2);
    from.push_back(r.args[0]);
  }
  if (batch[1] != batch[0]) {
    auto elements = [](const std::vector<Dim>& dims) -> int64_t {
      int64_t n = 1;
      for (const Dim& d : dims) {
        if (!d.is_static()) return -1;
        n *= d.size;
      }
      return n;
    };
    if (elements(batch[0]) < 0 || elements(batch[0]) != elements(batch[1])) return std::nullopt;
    const Node& b = tmp->nodes[from[1]];
    Node r;
    r.kind = OpKind::kReshape;
    r.type = b.type;
    r.type.shape = batch[0];
    r.type.shape.insert(r.type.shape.end(), b.type.shape.end() - 2, b.type.shape.end());
    r.shape = r.type.shape;
    r.args = {from[1]};
    r.wire_index = tmp->nodes[m.args[1]].wire_index;
    from[1] = Add(std::move(r), tags, tmp, shash, seen);
  }
  Node p = m;
  p.args = from;
  p.type.shape = batch[0];
  p.type.shape.push_back(m.type.shape[m.type.rank() - 2]);
  p.type.shape.push_back(m.type.shape.back());
  return Add(std::move(p), tags, tmp, shash, seen);
}

// One round of canonicalization: splits, then the rewrites below.
Chain CanonicalizeRound(const Chain& validated) {
  Chain c = validated;
  while (HasMixed(c)) {
    std::optional<Chain> split = SplitMixedReductions(c);
    if (!split.has_value()) break;
    c = *std::move(split);
  }
  const int n_in = c.num_inputs();
  const int n = static_cast<int>(c.nodes.size());
  std::vector<bool> live(n, false);
  for (int32_t o : c.outputs) live[o] = true;
  for (int32_t id = n - 1; id >= 0; --id) {
    if (!live[id]) continue;
    for (int32_t a : c.nodes[id].args) live[a] = true;
  }

  // Merge, fold and order operands into `tmp`, in the original order.
  Chain tmp;
  tmp.symbols = c.symbols;
  std::vector<int32_t> rep(n, -1);
  std::vector<uint64_t> shash;
  const std::vector<std::string> tags = SymbolTags(c);
  std::map<std::string, int32_t> seen;
  for (int32_t id = 0; id < n; ++id) {
    if (id >= n_in && !live[id]) continue;
    Node m = Clean(c.nodes[id]);
    for (int32_t& a : m.args) a = rep[a];
    if (IsCommutative(m.kind)) {
      std::sort(m.args.begin(), m.args.end(), [&shash](int32_t x, int32_t y) {
        return shash[x] != shash[y] ? shash[x] < shash[y] : x < y;
      });
    }
    bool all_constant = !m.args.empty() && IsElementwise(m.kind) && m.kind != OpKind::kCast;
    std::vector<double> values;
    for (int32_t a : m.args) {
      all_constant = all_constant && tmp.nodes[a].kind == OpKind::kConstant;
      values.push_back(tmp.nodes[a].value);
    }
    if (all_constant) {
      tmp.nodes.push_back(m);  // ComputeDType reads the node in context.
      DType compute = ComputeDType(tmp, static_cast<int32_t>(tmp.nodes.size() - 1));
      bool weak = IsWeakScalar(tmp, static_cast<int32_t>(tmp.nodes.size() - 1));
      tmp.nodes.pop_back();
      double r;
      // A weak result must re-validate to the same type, or the canonical
      // chain would not validate unchanged (sqrt(4) is f32, 4 would be i32).
      auto weak_type = [](double v) {
        bool integral = v == std::floor(v) && v >= -2147483648.0 && v <= 2147483647.0 &&
                        !(v == 0 && std::signbit(v));
        return integral ? DType::kI32 : DType::kF32;
      };
      // An i64 constant past 2^53 does not validate (a wire double is not
      // exact there): such a product stays an op.
      if (FoldExactly(m, compute, values, &r) && (!weak || weak_type(r) == m.type.dtype) &&
          !(m.type.dtype == DType::kI64 && std::fabs(r) > 9007199254740992.0)) {
        Node k;
        k.kind = OpKind::kConstant;
        k.type = m.type;
        k.dtype = weak ? DType::kInvalid : m.type.dtype;
        k.value = r;
        k.wire_index = m.wire_index;
        m = std::move(k);
      }
    }
    // A view that changes nothing is its operand; a reshape of a reshape
    // reshapes the first's operand.
    if (m.kind == OpKind::kReshape && tmp.nodes[m.args[0]].kind == OpKind::kReshape) {
      m.args[0] = tmp.nodes[m.args[0]].args[0];
    }
    if ((m.kind == OpKind::kReshape || m.kind == OpKind::kExpand) &&
        tmp.nodes[m.args[0]].type.shape == m.type.shape) {
      rep[id] = m.args[0];
      continue;
    }
    // A product of reshapes that merge or split batch dims alone (as
    // ATen's bmm lowering of a batched matmul does) is the product over the
    // dims they reshape, reshaped.
    if (std::optional<int32_t> unmerged = UnmergedProduct(m, tags, &tmp, &shash, &seen)) {
      const int32_t p = *unmerged;
      if (tmp.nodes[p].type.shape == m.type.shape) {
        rep[id] = p;
        continue;
      }
      Node r;
      r.kind = OpKind::kReshape;
      r.type = m.type;
      r.shape = m.type.shape;
      r.args = {p};
      r.wire_index = m.wire_index;
      m = std::move(r);
    }
    rep[id] = Add(std::move(m), tags, &tmp, &shash, &seen);
  }

  // Final ids: inputs first, then a post-order walk from the outputs.
  std::vector<bool> visited(tmp.nodes.size(), false);
  std::vector<int32_t> order;
  for (int32_t i = 0; i < n_in; ++i) PostOrder(tmp.nodes, i, &visited, &order);
  for (int32_t o : c.outputs) PostOrder(tmp.nodes, rep[o], &visited, &order);
  std::vector<int32_t> new_id(tmp.nodes.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) new_id[order[i]] = static_cast<int32_t>(i);

  Chain out;
  out.input_names = c.input_names;
  out.output_names = c.output_names;
  for (int32_t old : order) {
    Node m = tmp.nodes[old];
    for (int32_t& a : m.args) a = new_id[a];
    out.nodes.push_back(std::move(m));
  }
  for (int32_t o : c.outputs) out.outputs.push_back(new_id[rep[o]]);

  // Symbols by first use.
  std::vector<int32_t> sym(c.symbols.size(), -1);
  auto renumber = [&](std::vector<Dim>& dims) {
    for (Dim& d : dims) {
      if (d.is_static()) continue;
      if (sym[d.symbol] < 0) {
        sym[d.symbol] = static_cast<int32_t>(out.symbols.size());
        out.symbols.push_back(c.symbols[d.symbol]);
      }
      d.symbol = sym[d.symbol];
    }
  };
  for (Node& m : out.nodes) {
    renumber(m.type.shape);
    renumber(m.shape);
  }
  return out;
}

}  // namespace

Chain Canonicalize(const Chain& validated) {
  Chain c = CanonicalizeRound(validated);
  // A mixed reduction whose split did not validate beside ops the round
  // then removed (dead or folded) splits in a later round; to a fixed
  // point, so that canonicalizing again changes nothing. Each such round
  // splits one level of every mixed reduction; a rank bounds the levels.
  for (int round = 0; round < Limits{}.max_rank && HasMixed(c) && SplitMixedReductions(c).has_value();
       ++round) {
    c = CanonicalizeRound(c);
  }
  return c;
}

std::string ChainHash(const Chain& c) {
  std::string s = kHashVersion;
  absl::StrAppend(&s, "\nsymbols");
  for (const SymbolInfo& sym : c.symbols) absl::StrAppend(&s, " max=", sym.max);
  for (const Node& n : c.nodes) {
    absl::StrAppend(&s, "\n", NodeBody(n));
    for (int32_t a : n.args) absl::StrAppend(&s, ",%", a);
  }
  absl::StrAppend(&s, "\noutputs");
  for (int32_t o : c.outputs) absl::StrAppend(&s, ",%", o);
  return Sha256Hex(s);
}

}  // namespace kfuse
