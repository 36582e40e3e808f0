// The partition of chains with matrix products: a matmul kernel per product
// with its element-wise epilogue, and pointwise kernels for the element-wise
// work the products' kernels cannot absorb (see PartitionChain for the rules).
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "codegen/attention.h"
#include "codegen/partition.h"
#include "codegen/subchain.h"
#include "core/status.h"

namespace kfuse {
namespace partition_internal {
namespace {

// What a node is to a chain with products.
enum class Role : uint8_t {
  kLeaf,      // A chain input or constant.
  kLeafWork,  // Element-wise work on leaves only: recomputed wherever it is read.
  kView,      // A permute or expand of a chain input that matmuls read as strides.
  kProduct,   // A matmul or an epilogue node: its kernel stores it when others read it.
  kLoose,     // Element-wise work on products that no matmul kernel absorbs, and
              // views other than kView (slices, views of computed values).
};

bool IsLeaf(const Chain& c, int32_t id) {
  return c.nodes[id].kind == OpKind::kInput || c.nodes[id].kind == OpKind::kConstant;
}

std::string Labels(const Chain& c, const std::set<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(OpLabel(c, id));
  return absl::StrJoin(out, ", ");
}

// A permutation that swaps the last two axes and keeps the others.
bool SwapsLastTwo(const std::vector<int64_t>& perm) {
  const int64_t r = static_cast<int64_t>(perm.size());
  if (r < 2 || perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return false;
  for (int64_t i = 0; i + 2 < r; ++i) {
    if (perm[i] != i) return false;
  }
  return true;
}

// OK when layout node `id`, a view of a chain input (IsViewOfInput), is an
// operand the matmul kernels read as strides: a swap of the input's last two
// dims or a batch expand of it, read by matmuls only. Other views (slices,
// concats, views of computed values) are computed as element-wise work is,
// and stored first by a pointwise or row kernel where a matmul reads them.
absl::Status CheckOperandView(const Chain& c, int32_t id, const std::vector<int32_t>& users,
                              bool is_output) {
  const Node& n = c.nodes[id];
  bool by_matmul = false, elsewhere = is_output;
  for (int32_t u : users) (c.nodes[u].kind == OpKind::kMatmul ? by_matmul : elsewhere) = true;
  if (by_matmul) {
    const Node& in = c.nodes[n.args[0]];
    std::string what;
    if (n.kind != OpKind::kPermute && n.kind != OpKind::kExpand) {
      what = absl::StrCat("a ", std::string(OpName(n.kind)));
    } else if (in.kind != OpKind::kInput) {
      what = absl::StrCat("a ", std::string(OpName(n.kind)), " of another view of an input");
    } else if (n.kind == OpKind::kPermute && !SwapsLastTwo(n.axes)) {
      what = "a permute other than a swap of the last two dims";
    } else if (n.kind == OpKind::kExpand &&
               (in.type.rank() < 2 || !std::equal(in.type.shape.end() - 2, in.type.shape.end(),
                                                  n.type.shape.end() - 2))) {
      what = "an expand of a matrix dim";
    }
    if (!what.empty()) {
      return absl::UnimplementedError(absl::StrCat(
          OpLabel(c, id), ": ", what,
          " as a matmul operand is not generated yet (an operand is a chain input, a swap of its "
          "last two dims, a batch expand of it, element-wise work, or an earlier product)"));
    }
  }
  if (elsewhere) {
    return absl::UnimplementedError(absl::StrCat(
        OpLabel(c, id),
        ": a layout view in a chain with a matmul is generated only as a matmul operand (a swap "
        "of a chain input's last two dims or a batch expand of one); elsewhere it is not "
        "generated yet"));
  }
  return absl::OkStatus();
}

// A kernel being planned: what it computes, the nodes other kernels may read
// from it, and what it reads from others.
struct Planned {
  int32_t anchor = -1;
  KernelGroup k;
  std::set<int32_t> nodes;
  std::set<int32_t> stores;  // Nodes it writes when other kernels read them.
  std::set<int32_t> reads;   // Nodes of other kernels it reads from memory.
  std::set<int32_t> shared;  // Its nodes other kernels read.
  std::set<int32_t> writes;  // The chain outputs it writes (pointwise and row kernels).
  bool apart = false;        // A trailing kernel of several, one per nesting output shape.
  // A matmul kernel's nodes with one value per row of the product: its row
  // reductions and what is computed from them alone.
  std::set<int32_t> per_row;
};

// True when reduction `id` runs in the epilogue of the matmul kernel whose
// product is node `mm` (WhyNotInEpilogue): one CTA's tile holds its rows
// whole, so the sums never leave the SM. Wider rows span several CTAs, and
// integer or bool rows are the row family's: a row kernel reads the product
// back from memory.
bool ReducesInEpilogue(const Chain& c, int32_t mm, int32_t id) {
  return WhyNotInEpilogue(c, mm, id).empty();
}

std::string MatmulReason(const Chain& c, const Planned& p, const std::vector<Role>& role,
                         const std::vector<bool>& is_output) {
  const int32_t m = p.anchor;
  std::vector<std::string> epilogue;
  for (int32_t id : p.stores) {
    if (id != m) epilogue.push_back(std::string(OpName(c.nodes[id].kind)));
  }
  std::string out =
      epilogue.empty()
          ? absl::StrCat(OpLabel(c, m),
                         " with no epilogue: its accumulators are stored as they are")
          : absl::StrCat(OpLabel(c, m), " with its epilogue (", absl::StrJoin(epilogue, ", "),
                         ") applied to the accumulators before the store");
  std::set<int32_t> reductions;
  for (int32_t id : p.per_row) {
    if (IsReduction(c.nodes[id].kind)) reductions.insert(id);
  }
  if (!reductions.empty()) {
    absl::StrAppend(&out, "; its rows (N = ", c.nodes[m].type.shape.back().size,
                    ", at most ", kMaxEpilogueRow,
                    ") fit one CTA's tile, so the row reductions (", Labels(c, reductions),
                    ") run in the epilogue: no row is read back from memory");
  }
  std::set<int32_t> products, operands;
  for (int32_t r : p.reads) (role[r] == Role::kProduct ? products : operands).insert(r);
  if (!products.empty()) {
    absl::StrAppend(&out, "; a second matmul: compute-bound products stay separate; ",
                    Labels(c, products), products.size() == 1 ? "'s result is" : "'s results are",
                    " read from memory");
  }
  if (!operands.empty()) {
    absl::StrAppend(&out, "; an earlier kernel stores its computed operand ",
                    Labels(c, operands));
  }
  if (p.shared.empty()) {
    const bool one = std::count_if(p.stores.begin(), p.stores.end(),
                                   [&](int32_t id) { return is_output[id]; }) == 1;
    absl::StrAppend(&out,
                    one ? "; its result is a chain output" : "; its results are chain outputs");
  } else {
    absl::StrAppend(
        &out, p.shared.size() == 1 ? "; its result " : "; its results ", Labels(c, p.shared),
        p.shared.size() == 1 ? " is read by a later kernel" : " are read by later kernels");
  }
  return out;
}

// What reads stored node `root` from memory, for the reasons: the products
// (an attention named by its output's product), and other views.
std::string ReadersOf(const Chain& c, int32_t root, const std::vector<std::vector<int32_t>>& users,
                      const std::vector<int32_t>& attention_of, const std::vector<KernelGroup>& attentions) {
  std::set<int32_t> direct;
  std::set<std::string> attention;
  for (int32_t u : users[root]) {
    if (attention_of[u] >= 0) {
      attention.insert(absl::StrCat("the attention of ", OpLabel(c, attentions[attention_of[u]].results[0])));
    } else {
      direct.insert(u);
    }
  }
  std::vector<std::string> out;
  if (!direct.empty()) out.push_back(Labels(c, direct));
  out.insert(out.end(), attention.begin(), attention.end());
  return absl::StrJoin(out, ", ");
}

std::string PointwiseReason(const Chain& c, const Planned& p, const std::string& readers) {
  std::string out;
  if (!p.stores.empty()) {
    const int32_t root = *p.stores.begin();
    out = IsLayout(c.nodes[root].kind)
              ? absl::StrCat(OpLabel(c, root), ": a view read by ", readers,
                             " that no product reads as strides (a slice, a view of a computed "
                             "value, or one a reshape merges)")
              : absl::StrCat(OpLabel(c, root), ": element-wise work on an operand of ", readers);
    absl::StrAppend(&out, ", stored first, as product kernels stream their operands from memory");
  } else {
    out = "element-wise outputs that no matmul kernel takes as its epilogue, in one pass";
    if (p.apart) absl::StrAppend(&out, "; ", kOutputsApart);
  }
  if (!p.reads.empty()) {
    absl::StrAppend(&out, "; reads ", Labels(c, p.reads), " from memory, broadcast");
  }
  return out;
}

// The nodes computing `roots` from leaves and the nodes of `stored` (which
// other kernels store): element-wise work and row reductions, `roots`
// included when not stored.
std::set<int32_t> WorkClosure(const Chain& c, std::vector<int32_t> roots,
                              const std::set<int32_t>& stored) {
  std::set<int32_t> out;
  while (!roots.empty()) {
    const int32_t id = roots.back();
    roots.pop_back();
    if (IsLeaf(c, id) || stored.count(id) || !out.insert(id).second) continue;
    for (int32_t a : c.nodes[id].args) roots.push_back(a);
  }
  return out;
}

// A group with a reduction is a row kernel; else pointwise.
Family FamilyOf(const Chain& c, const std::set<int32_t>& nodes) {
  for (int32_t id : nodes) {
    if (IsReduction(c.nodes[id].kind)) return Family::kRowReduction;
  }
  return Family::kPointwise;
}

std::string RowReason(const Chain& c, const Planned& p, const std::string& readers) {
  std::set<int32_t> reductions;
  for (int32_t id : p.nodes) {
    if (IsReduction(c.nodes[id].kind)) reductions.insert(id);
  }
  std::string out;
  if (!p.stores.empty()) {
    out = absl::StrCat("row reductions (", Labels(c, reductions), ") on an operand of ", readers,
                       ": a row kernel stores it first, as product kernels stream their operands "
                       "from memory");
  } else {
    out = absl::StrCat("row reductions (", Labels(c, reductions),
                       ") with their element-wise neighbours in a row kernel of their own");
  }
  if (!p.reads.empty()) {
    absl::StrAppend(&out, "; reads ", Labels(c, p.reads),
                    " from memory (a product's rows span several of its CTAs' tiles)");
  }
  return out;
}

// Adds node `id`, where it is a permute, expand, reshape or slice, and those
// it is made of to `group`, down to the first other node: the attention
// kernel reads that node (a chain input, or what an earlier kernel stores:
// a fused projection's Q, K and V are slices of one product) through them,
// as strides and an offset.
void AddViews(const Chain& c, int32_t id, std::set<int32_t>* group) {
  for (;; id = c.nodes[id].args[0]) {
    const OpKind k = c.nodes[id].kind;
    if (k != OpKind::kPermute && k != OpKind::kExpand && k != OpKind::kReshape && k != OpKind::kSlice) return;
    group->insert(id);
  }
}

// The attention kernel of `nodes`, storing `result`, where nothing outside
// reads them but `result` and the kernel can take them whole.
std::optional<KernelGroup> Attention(const Chain& c, const std::vector<std::vector<int32_t>>& users,
                                     const std::set<int32_t>& nodes, int32_t result) {
  for (int32_t id : nodes) {
    if (id == result) continue;
    if (std::find(c.outputs.begin(), c.outputs.end(), id) != c.outputs.end()) return std::nullopt;
    for (int32_t u : users[id]) {
      if (!nodes.count(u)) return std::nullopt;
    }
  }
  KernelGroup g;
  g.family = Family::kAttention;
  g.nodes.assign(nodes.begin(), nodes.end());
  g.results = {result};
  if (std::find(c.outputs.begin(), c.outputs.end(), result) == c.outputs.end()) g.intermediates = {result};
  absl::StatusOr<SubChain> sub = Isolate(c, g);
  if (!sub.ok()) return std::nullopt;
  std::optional<AttentionMatch> m = MatchAttention(sub->chain);
  if (!m) return std::nullopt;
  const KernelGroup whole = AttentionGroup(sub->chain, *m);
  if (!CanGenerateAttention(sub->chain, whole, AttentionHeuristic(sub->chain, whole)).ok()) return std::nullopt;
  g.reason = whole.reason;
  g.intermediates.clear();  // The partition says which kernels read it.
  return g;
}

}  // namespace

std::vector<KernelGroup> FindAttentions(const Chain& c) {
  const int32_t n = static_cast<int32_t>(c.nodes.size());
  std::vector<std::vector<int32_t>> users(n);
  for (int32_t id = 0; id < n; ++id) {
    for (int32_t a : c.nodes[id].args) users[a].push_back(id);
  }
  auto is_output = [&](int32_t id) {
    return std::find(c.outputs.begin(), c.outputs.end(), id) != c.outputs.end();
  };
  std::vector<KernelGroup> out;
  std::set<int32_t> taken;
  for (int32_t pv = 0; pv < n; ++pv) {
    if (c.nodes[pv].kind != OpKind::kMatmul || taken.count(pv)) continue;
    // Back from the probabilities to the first product reached: QK^T.
    std::set<int32_t> group = {pv};
    int32_t qk = -1;
    bool ok = true;
    std::vector<int32_t> stack = {c.nodes[pv].args[0]};
    while (ok && !stack.empty()) {
      const int32_t id = stack.back();
      stack.pop_back();
      const Node& nd = c.nodes[id];
      if (nd.kind == OpKind::kInput || nd.kind == OpKind::kConstant || group.count(id)) continue;
      if (nd.kind == OpKind::kMatmul) {
        ok = qk < 0 || qk == id;
        qk = id;
        group.insert(id);
        continue;
      }
      if (IsLayout(nd.kind) && nd.kind != OpKind::kIota) {
        AddViews(c, id, &group);  // What they view is read from memory (or an input).
        continue;
      }
      ok = IsElementwise(nd.kind) || IsReduction(nd.kind) || nd.kind == OpKind::kIota;
      group.insert(id);
      for (int32_t a : nd.args) stack.push_back(a);
    }
    if (!ok || qk < 0) continue;
    for (int32_t a : {c.nodes[qk].args[0], c.nodes[qk].args[1], c.nodes[pv].args[1]}) AddViews(c, a, &group);
    // The views after pv that lay its output out (heads back between the
    // tokens and the head dim, then merged): stored so by the kernel, where
    // they hold a permute and it can.
    std::vector<int32_t> tail;
    for (int32_t id = pv; users[id].size() == 1 && !is_output(id);) {
      id = users[id][0];
      const Node& n = c.nodes[id];
      if (n.kind != OpKind::kReshape && (n.kind != OpKind::kPermute || n.axes.back() != n.type.rank() - 1)) break;
      tail.push_back(id);
    }
    if (std::none_of(tail.begin(), tail.end(), [&](int32_t id) { return c.nodes[id].kind == OpKind::kPermute; })) {
      tail.clear();
    }
    std::optional<KernelGroup> g;
    if (!tail.empty()) {
      std::set<int32_t> laid_out = group;
      laid_out.insert(tail.begin(), tail.end());
      g = Attention(c, users, laid_out, tail.back());
    }
    if (!g) g = Attention(c, users, group, pv);
    if (!g) continue;
    taken.insert(g->nodes.begin(), g->nodes.end());
    out.push_back(*std::move(g));
  }
  return out;
}

// Why anchor order is a valid launch order: every kernel reads only nodes of
// kernels with smaller anchors. Node ids are a topological order, and each
// node a kernel stores has an id at least its kernel's anchor (an epilogue
// node comes after its product; a pointwise kernel stores only its anchor).
//  - A product's operand read from memory has a smaller id than the product,
//    so its kernel's anchor is smaller still.
//  - An epilogue node joins the kernel of the largest anchor among its
//    operands' product kernels: the others it reads have smaller anchors.
//    A reduction in an epilogue, and per-row work, join their operands'
//    own kernel.
//    The only pointwise kernels it reads store its own product's operands
//    (a node reading other loose work is loose itself).
//  - A pointwise or row kernel storing an operand reads product kernels'
//    nodes that come before the operand it is anchored at, so their
//    kernels' anchors are smaller; the outputs it also writes are taken only
//    where all they read is stored by kernels anchored before it.
//  - The trailing kernel reads product nodes and stored operands that come
//    before its roots, the largest of which is its anchor.
// Anchors are distinct: products and element-wise nodes differ, each operand
// gets one kernel, and the trailing kernel's outputs are no other kernel's.
absl::StatusOr<Partition> MatmulPartition(const Chain& c) {
  const int32_t n = static_cast<int32_t>(c.nodes.size());
  std::vector<std::vector<int32_t>> users(n);
  for (int32_t id = 0; id < n; ++id) {
    for (int32_t a : c.nodes[id].args) {
      if (users[a].empty() || users[a].back() != id) users[a].push_back(id);
    }
  }
  std::vector<bool> is_output(n, false);
  for (int32_t o : c.outputs) is_output[o] = true;
  // Attentions between the products: a kernel each. A view of an input
  // they read beside their own is stored for them (loose).
  const std::vector<KernelGroup> attentions = FindAttentions(c);
  std::vector<int32_t> attention_of(n, -1);
  for (size_t g = 0; g < attentions.size(); ++g) {
    for (int32_t id : attentions[g].nodes) attention_of[id] = static_cast<int32_t>(g);
  }
  auto read_by_attention = [&](int32_t id) {
    return std::any_of(users[id].begin(), users[id].end(),
                       [&](int32_t u) { return attention_of[u] >= 0 && attention_of[id] < 0; });
  };

  // What the matmul plans do not cover, in node order.
  int32_t first_matmul = n;
  for (int32_t id = 0; id < n; ++id) {
    const OpKind k = c.nodes[id].kind;
    if (attention_of[id] >= 0) continue;
    if (k == OpKind::kMatmul) first_matmul = std::min(first_matmul, id);
    if (IsReduction(k)) {
      const int rank = c.nodes[c.nodes[id].args[0]].type.rank();
      if (c.nodes[id].axes != std::vector<int64_t>{rank - 1}) {
        return absl::UnimplementedError(absl::StrCat(
            OpLabel(c, id), id > first_matmul
                                ? ": a reduction over outer axes after a matmul is not generated "
                                  "yet (reductions along rows are)"
                                : ": a reduction over outer axes in a chain with a matmul is not "
                                  "generated yet (reductions along rows are)"));
      }
    }
    if (IsLayout(k) && IsViewOfInput(c, id) && !read_by_attention(id)) {
      KFUSE_RETURN_IF_ERROR(CheckOperandView(c, id, users[id], is_output[id]));
    }
    if (!IsLeaf(c, id) && !IsElementwise(k) && !IsLayout(k) && !IsReduction(k) &&
        k != OpKind::kMatmul) {
      return absl::UnimplementedError(
          absl::StrCat(OpLabel(c, id), ": this op is not generated yet beside a matmul"));
    }
  }

  // Products and their epilogues, in node order.
  std::vector<Role> role(n, Role::kLeaf);
  // The kernel in `plan` that stores a product node or an element-wise operand.
  std::vector<int32_t> kernel_of(n, -1);
  std::vector<Planned> plan;
  std::set<int32_t> operands;  // Element-wise operands of products (and attentions).
  std::vector<int32_t> attention_kernel(attentions.size(), -1);
  for (int32_t id = 0; id < n; ++id) {
    const Node& nd = c.nodes[id];
    if (IsLeaf(c, id)) continue;
    if (const int32_t g = attention_of[id]; g >= 0) {
      // The attention's nodes are its kernel's; what it reads of other work
      // is stored first.
      if (attention_kernel[g] < 0) {
        attention_kernel[g] = static_cast<int32_t>(plan.size());
        Planned p;
        p.anchor = attentions[g].results[0];
        p.k.family = Family::kAttention;
        p.k.reason = attentions[g].reason;
        p.nodes.insert(attentions[g].nodes.begin(), attentions[g].nodes.end());
        p.stores = {p.anchor};
        plan.push_back(std::move(p));
      }
      role[id] = Role::kProduct;
      kernel_of[id] = attention_kernel[g];
      for (int32_t a : nd.args) {
        if (attention_of[a] < 0 && (role[a] == Role::kLeafWork || role[a] == Role::kLoose)) operands.insert(a);
      }
      continue;
    }
    if (IsLayout(nd.kind)) {
      // Another view is work no epilogue takes: loose, computed where read.
      role[id] = IsViewOfInput(c, id) && !read_by_attention(id) ? Role::kView : Role::kLoose;
      continue;
    }
    if (nd.kind == OpKind::kMatmul) {
      role[id] = Role::kProduct;
      kernel_of[id] = static_cast<int32_t>(plan.size());
      Planned p;
      p.anchor = id;
      p.k.family = Family::kMatmul;
      p.nodes = p.stores = {id};
      for (int32_t a : nd.args) {
        if (role[a] == Role::kLeafWork || role[a] == Role::kLoose) operands.insert(a);
      }
      plan.push_back(std::move(p));
      continue;
    }
    if (IsReduction(nd.kind)) {
      // Along short rows of a product: in its kernel's epilogue. Else row
      // work: a row kernel of its own.
      const int32_t a = nd.args[0];
      if (role[a] == Role::kProduct && plan[kernel_of[a]].k.family == Family::kMatmul &&
          ReducesInEpilogue(c, plan[kernel_of[a]].anchor, id)) {
        Planned& p = plan[kernel_of[a]];
        role[id] = Role::kProduct;
        kernel_of[id] = kernel_of[a];
        p.nodes.insert(id);
        p.stores.insert(id);
        p.per_row.insert(id);
      } else {
        role[id] = Role::kLoose;
      }
      continue;
    }
    int32_t latest = -1;  // The kernel of the largest anchor among the products read.
    bool leaf_only = true, loose = false;
    for (int32_t a : nd.args) {
      leaf_only = leaf_only && (role[a] == Role::kLeaf || role[a] == Role::kLeafWork);
      loose = loose || role[a] == Role::kLoose;
      if (role[a] == Role::kProduct && (latest < 0 || plan[kernel_of[a]].anchor > plan[latest].anchor)) {
        latest = kernel_of[a];
      }
    }
    // An attention's kernel takes no epilogue: work on its output is loose.
    loose = loose || (latest >= 0 && plan[latest].k.family == Family::kAttention);
    // Work on a kernel's per-row values alone (a norm's rsqrt(var + eps)).
    bool per_row = latest >= 0 && !plan[latest].per_row.empty();
    for (int32_t a : nd.args) {
      per_row = per_row && (c.nodes[a].kind == OpKind::kConstant || plan[latest].per_row.count(a));
    }
    per_row = per_row && nd.type.shape == PerRowShape(c.nodes[plan[latest].anchor].type.shape);
    if (leaf_only) {
      role[id] = Role::kLeafWork;
    } else if (per_row) {
      role[id] = Role::kProduct;
      kernel_of[id] = latest;
      plan[latest].nodes.insert(id);
      plan[latest].stores.insert(id);
      plan[latest].per_row.insert(id);
    } else if (!loose && latest >= 0 && nd.type.shape == c.nodes[plan[latest].anchor].type.shape) {
      role[id] = Role::kProduct;
      kernel_of[id] = latest;
      plan[latest].nodes.insert(id);
      plan[latest].stores.insert(id);
      // Element-wise work on leaves that the epilogue reads: computed per
      // output element, but for the product's own operands, which an earlier
      // kernel stores and this one reads.
      const std::vector<int32_t>& own = c.nodes[plan[latest].anchor].args;
      for (int32_t a : nd.args) {
        if (role[a] != Role::kLeafWork) continue;
        const std::set<int32_t> work =
            ElementwiseClosure(c, {a}, std::set<int32_t>(own.begin(), own.end()));
        plan[latest].nodes.insert(work.begin(), work.end());
      }
    } else {
      role[id] = Role::kLoose;
    }
  }

  // Pointwise kernels read every product node they need from memory, and
  // the views stored before them.
  std::set<int32_t> stored;
  for (int32_t id = 0; id < n; ++id) {
    if (role[id] == Role::kProduct) stored.insert(id);
  }
  std::set<int32_t> written;  // Outputs the kernels so far write.
  for (const Planned& p : plan) {
    for (int32_t id : p.stores) {
      if (is_output[id]) written.insert(id);
    }
  }
  for (int32_t o : operands) {
    Planned p;
    p.anchor = o;
    p.nodes = WorkClosure(c, {o}, stored);
    if (IsLayout(c.nodes[o].kind)) stored.insert(o);  // Later kernels read it.
    p.k.family = FamilyOf(c, p.nodes);
    p.stores = {o};
    // Outputs of the same rows (a softmax's probabilities beside what a
    // product reads of them) or, for a pointwise kernel, of its shape are
    // written here too, rather than by the trailing kernel reading the
    // products' rows again. Only where what they read is stored before o.
    for (int32_t out : c.outputs) {
      // An output that is a product's operand is its own kernel's to write.
      if (IsLeaf(c, out) || stored.count(out) || operands.count(out) || written.count(out) || p.nodes.count(out)) {
        continue;
      }
      std::set<int32_t> more = p.nodes;
      const std::set<int32_t> work = WorkClosure(c, {out}, stored);
      more.insert(work.begin(), work.end());
      bool earlier = FamilyOf(c, more) == p.k.family;
      for (int32_t id : more) {
        for (int32_t a : c.nodes[id].args) {
          earlier = earlier && (IsLeaf(c, a) || role[a] == Role::kView || more.count(a) ||
                                plan[kernel_of[a]].anchor < o);
        }
      }
      if (!earlier) continue;
      if (p.k.family == Family::kPointwise) {
        if (c.nodes[out].type.shape != c.nodes[o].type.shape) continue;
      } else {
        KernelGroup k;
        k.family = Family::kRowReduction;
        k.nodes.assign(more.begin(), more.end());
        std::set<int32_t> results = {o};
        for (int32_t id : more) {
          if (is_output[id]) results.insert(id);
        }
        k.results.assign(results.begin(), results.end());
        k.intermediates = {o};
        if (!CheckRowKernel(c, k).ok()) continue;
      }
      p.nodes = std::move(more);
    }
    // The outputs it computes, but for other products' operands: the kernel
    // storing each of those writes it.
    for (int32_t id : p.nodes) {
      if (is_output[id] && (id == o || !operands.count(id)) && written.insert(id).second) p.writes.insert(id);
    }
    kernel_of[o] = static_cast<int32_t>(plan.size());
    plan.push_back(std::move(p));
  }
  std::vector<int32_t> roots;
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    const int32_t o = c.outputs[j];
    if (IsLeaf(c, o)) {
      return absl::UnimplementedError(
          absl::StrCat("outputs[", j,
                       "]: a chain input or constant as an output beside a matmul is not "
                       "generated yet"));
    }
    if (!written.count(o)) roots.push_back(o);
  }
  if (!roots.empty()) {
    // Reading the operands earlier kernels store (each comes before the
    // root that reaches it) rather than computing them again.
    std::set<int32_t> readable = stored;
    readable.insert(operands.begin(), operands.end());
    // Element-wise outputs whose shapes do not nest get a pointwise kernel
    // each (one iterates over the broadcast of the shapes it writes). Beside
    // outputs that reduce rows, they stay in the row kernel where it can
    // write them, and are pointwise kernels of their own where it cannot.
    std::vector<int32_t> reducing, plain;
    for (int32_t o : roots) {
      (FamilyOf(c, WorkClosure(c, {o}, readable)) == Family::kPointwise ? plain : reducing).push_back(o);
    }
    auto row_kernel_takes = [&](const std::vector<int32_t>& outs) {
      KernelGroup k;
      k.family = Family::kRowReduction;
      const std::set<int32_t> nodes = WorkClosure(c, outs, readable);
      k.nodes.assign(nodes.begin(), nodes.end());
      const std::set<int32_t> results(outs.begin(), outs.end());
      k.results.assign(results.begin(), results.end());
      return CheckRowKernel(c, k).ok();
    };
    std::vector<std::vector<int32_t>> parts = {roots};
    bool apart = false;  // Pointwise kernels, one per group of nesting output shapes.
    if (!plain.empty() && (reducing.empty() || !row_kernel_takes(roots))) {
      parts.clear();
      if (!reducing.empty()) parts.push_back(reducing);
      std::vector<size_t> which;
      for (size_t j = 0; j < c.outputs.size(); ++j) {
        if (std::find(plain.begin(), plain.end(), c.outputs[j]) != plain.end()) which.push_back(j);
      }
      const std::vector<OutputGroup> groups = OutputKernels(c, std::move(which));
      apart = groups.size() > 1;
      for (const OutputGroup& g : groups) {
        std::set<int32_t> part;
        for (size_t j : g.outputs) part.insert(c.outputs[j]);
        parts.emplace_back(part.begin(), part.end());
      }
    }
    for (const std::vector<int32_t>& part : parts) {
      Planned p;
      p.anchor = *std::max_element(part.begin(), part.end());
      p.nodes = WorkClosure(c, part, readable);
      p.k.family = FamilyOf(c, p.nodes);
      p.writes.insert(part.begin(), part.end());
      p.apart = apart && p.k.family == Family::kPointwise;
      std::vector<size_t> which;  // The outputs the kernel writes.
      for (size_t j = 0; j < c.outputs.size(); ++j) {
        if (p.writes.count(c.outputs[j])) which.push_back(j);
      }
      KFUSE_RETURN_IF_ERROR(OutputsShareOneIterationSpace(c, which));
      plan.push_back(std::move(p));
    }
  }

  // What each kernel reads from which (operand views are read as strides).
  for (Planned& p : plan) {
    for (int32_t id : p.nodes) {
      for (int32_t a : c.nodes[id].args) {
        if (IsLeaf(c, a) || role[a] == Role::kView || p.nodes.count(a)) continue;
        KFUSE_CHECK(kernel_of[a] >= 0);
        Planned& from = plan[kernel_of[a]];
        KFUSE_CHECK(from.stores.count(a) && from.anchor < p.anchor);
        p.reads.insert(a);
        from.shared.insert(a);
      }
    }
  }
  std::sort(plan.begin(), plan.end(),
            [](const Planned& a, const Planned& b) { return a.anchor < b.anchor; });
  Partition out;
  for (Planned& p : plan) {
    KernelGroup& k = p.k;
    k.nodes.assign(p.nodes.begin(), p.nodes.end());
    k.intermediates.assign(p.shared.begin(), p.shared.end());
    out.intermediates.insert(out.intermediates.end(), p.shared.begin(), p.shared.end());
    // A matmul kernel writes its product and epilogue nodes that are
    // outputs; a pointwise or row one the outputs planned for it (each
    // output one kernel's, though several may compute it).
    std::set<int32_t> results(p.shared.begin(), p.shared.end());
    results.insert(p.writes.begin(), p.writes.end());
    const bool product = k.family == Family::kMatmul || k.family == Family::kAttention;
    for (int32_t id : p.stores) {
      if (product && is_output[id]) results.insert(id);
    }
    k.results.assign(results.begin(), results.end());
    if (k.family != Family::kAttention) {  // An attention's is the match's.
      const std::string readers =
          p.stores.empty() ? "" : ReadersOf(c, *p.stores.begin(), users, attention_of, attentions);
      k.reason = k.family == Family::kMatmul ? MatmulReason(c, p, role, is_output)
                 : k.family == Family::kRowReduction ? RowReason(c, p, readers)
                                                      : PointwiseReason(c, p, readers);
    }
    if (k.family == Family::kRowReduction) {
      // The row generator sees the group as a chain of its own.
      KFUSE_RETURN_IF_ERROR(CheckRowKernel(c, k));
    }
    out.kernels.push_back(std::move(k));
  }
  std::sort(out.intermediates.begin(), out.intermediates.end());
  return out;
}

}  // namespace partition_internal

std::vector<Dim> PerRowShape(std::vector<Dim> product_shape) {
  product_shape.back() = Dim::Static(1);
  return product_shape;
}

std::string WhyNotInEpilogue(const Chain& c, int32_t mm, int32_t id) {
  const Node& n = c.nodes[id];
  const Node& operand = c.nodes[n.args[0]];
  const std::vector<Dim>& out = c.nodes[mm].type.shape;
  const Dim& width = out.back();
  if (n.axes != std::vector<int64_t>{static_cast<int64_t>(out.size()) - 1} ||
      n.type.shape != PerRowShape(out)) {
    return "it must reduce the product's last dim and keep it";
  }
  if (!width.is_static() || width.size > kMaxEpilogueRow) {
    return absl::StrCat("its rows must be static and at most ", kMaxEpilogueRow,
                        " wide (one CTA's tile)");
  }
  if (width.size < 2) return "its rows must be at least 2 wide";
  if (operand.type.shape != out) return "its operand must have the product's shape";
  const DType t = operand.type.dtype;
  if (t != DType::kF32 && t != DType::kF16 && t != DType::kBF16) {
    return absl::StrCat("it reduces ", std::string(DTypeName(t)),
                        " values; only floating-point rows are reduced in an epilogue");
  }
  return "";
}

}  // namespace kfuse
