// Recognises the attention composite's expansion in a canonical chain.
#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/attention.h"

namespace kfuse {
namespace {

bool IsConst(const Chain& c, int32_t id, double v) {
  const Node& n = c.nodes[id];
  if (n.kind != OpKind::kConstant) return false;
  return std::isinf(v) ? n.value == v : n.value == v && !std::signbit(n.value);
}

bool IsView(OpKind k) {
  return k == OpKind::kReshape || k == OpKind::kExpand || k == OpKind::kPermute || k == OpKind::kSlice;
}

// A reduction along the last axis with keepdim, of `arg`.
bool LastAxisReduce(const Chain& c, int32_t id, OpKind kind, int32_t arg) {
  const Node& n = c.nodes[id];
  if (n.kind != kind || n.args[0] != arg || !n.keepdim) return false;
  const int rank = c.nodes[arg].type.rank();
  return n.axes.size() == 1 && n.axes[0] == rank - 1;
}

// The axis of the score frame (rank `frame_rank`) an iota counts along, or -1.
int IotaFrameAxis(const Chain& c, int32_t id, int frame_rank,
                  const std::vector<Dim>& frame) {
  const Node& n = c.nodes[id];
  if (n.kind != OpKind::kIota) return -1;
  const int axis = static_cast<int>(n.axis) + frame_rank - n.type.rank();
  if (axis < 0 || n.type.shape[n.axis] != frame[axis]) return -1;
  return axis;
}

// Whether `cond` (a conjunction) holds only where key j <= query i.
bool ImpliesCausal(const Chain& c, int32_t cond, const std::vector<Dim>& frame) {
  const Node& n = c.nodes[cond];
  const int r = static_cast<int>(frame.size());
  if (n.kind == OpKind::kLogicalAnd) {
    return ImpliesCausal(c, n.args[0], frame) || ImpliesCausal(c, n.args[1], frame);
  }
  if (n.kind != OpKind::kLe && n.kind != OpKind::kGe) return false;
  const int32_t key = n.kind == OpKind::kLe ? n.args[0] : n.args[1];
  const int32_t query = n.kind == OpKind::kLe ? n.args[1] : n.args[0];
  return IotaFrameAxis(c, key, r, frame) == r - 1 && IotaFrameAxis(c, query, r, frame) == r - 2;
}

}  // namespace

std::optional<AttentionMatch> MatchAttention(const Chain& c) {
  const int32_t count = static_cast<int32_t>(c.nodes.size());
  std::vector<std::vector<int32_t>> users(count);
  std::vector<int32_t> matmuls;
  for (int32_t id = 0; id < count; ++id) {
    for (int32_t a : c.nodes[id].args) users[a].push_back(id);
    if (c.nodes[id].kind == OpKind::kMatmul) matmuls.push_back(id);
  }
  if (matmuls.size() != 2) return std::nullopt;
  AttentionMatch m;
  m.qk = matmuls[0];
  m.pv = matmuls[1];
  auto kind = [&](int32_t id) { return c.nodes[id].kind; };

  // pv's first operand back to the division.
  m.p = c.nodes[m.pv].args[0];
  int32_t cur = m.p;
  if (kind(cur) == OpKind::kCast) cur = c.nodes[cur].args[0];
  int32_t guard_cond = -1;
  if (kind(cur) == OpKind::kWhere) {
    const Node& w = c.nodes[cur];
    if (!IsConst(c, w.args[1], 0.0)) return std::nullopt;
    m.guard = cur;
    guard_cond = w.args[0];
    cur = w.args[2];
  }
  if (kind(cur) != OpKind::kDiv) return std::nullopt;
  m.div = cur;
  m.exp = c.nodes[cur].args[0];
  m.sum = c.nodes[cur].args[1];
  if (kind(m.exp) != OpKind::kExp) return std::nullopt;
  m.sub = c.nodes[m.exp].args[0];
  if (kind(m.sub) != OpKind::kSub) return std::nullopt;
  m.x = c.nodes[m.sub].args[0];
  m.max = c.nodes[m.sub].args[1];
  if (!LastAxisReduce(c, m.max, OpKind::kReduceMax, m.x) ||
      !LastAxisReduce(c, m.sum, OpKind::kReduceSum, m.exp)) {
    return std::nullopt;
  }
  const std::vector<Dim>& frame = c.nodes[m.qk].type.shape;
  if (c.nodes[m.x].type.shape != frame) return std::nullopt;
  if (m.guard >= 0) {
    const Node& eq = c.nodes[guard_cond];
    if (eq.kind != OpKind::kEq) return std::nullopt;
    const int32_t other = eq.args[0] == m.max ? eq.args[1] : eq.args[1] == m.max ? eq.args[0] : -1;
    if (other < 0 || !IsConst(c, other, -INFINITY)) return std::nullopt;
    m.safe = true;
  }

  // The score function: element-wise work and iota from qk and leaves.
  std::set<int32_t> score;
  std::vector<int32_t> stack{m.x};
  bool reaches_qk = false;
  while (!stack.empty()) {
    const int32_t id = stack.back();
    stack.pop_back();
    if (id == m.qk) {
      reaches_qk = true;
      continue;
    }
    const OpKind k = kind(id);
    if (k == OpKind::kInput || k == OpKind::kConstant) continue;
    if (IsView(k)) {
      // A view of an input, read through strides.
      int32_t base = id;
      while (IsView(kind(base))) base = c.nodes[base].args[0];
      if (kind(base) != OpKind::kInput) return std::nullopt;
      continue;
    }
    if (k != OpKind::kIota && (!IsElementwise(k) || k == OpKind::kConstant)) return std::nullopt;
    if (!score.insert(id).second) continue;
    for (int32_t a : c.nodes[id].args) stack.push_back(a);
  }
  if (!reaches_qk) return std::nullopt;
  m.score.assign(score.begin(), score.end());
  if (kind(m.x) == OpKind::kWhere && IsConst(c, c.nodes[m.x].args[2], -INFINITY)) {
    const int32_t cond = c.nodes[m.x].args[0];
    m.causal = ImpliesCausal(c, cond, frame);
    if (m.causal && kind(cond) != OpKind::kLogicalAnd) m.unmasked = c.nodes[m.x].args[1];
  }

  // A positive scale alone (maybe masked) folds into the exponent.
  {
    int32_t y = m.x;
    if (kind(y) == OpKind::kWhere && IsConst(c, c.nodes[y].args[2], -INFINITY)) y = c.nodes[y].args[1];
    const Node& n = c.nodes[y];
    if (n.kind == OpKind::kMul && users[m.qk].size() == 1 && users[y].size() == 1) {
      const int32_t k = n.args[0] == m.qk ? n.args[1] : n.args[1] == m.qk ? n.args[0] : -1;
      if (k >= 0 && kind(k) == OpKind::kConstant && std::isfinite(c.nodes[k].value) &&
          c.nodes[k].value > 0) {
        m.scaled = y;
        m.scale = c.nodes[k].value;
      }
    }
  }

  // The log-sum-exp output: add(m, log(z)), then casts and reshapes.
  for (int32_t u : users[m.sum]) {
    if (u == m.div) continue;
    if (kind(u) != OpKind::kLog || users[u].size() != 1) return std::nullopt;
    const int32_t add = users[u][0];
    const Node& a = c.nodes[add];
    if (a.kind != OpKind::kAdd || m.lse >= 0) return std::nullopt;
    if (!((a.args[0] == m.max && a.args[1] == u) || (a.args[1] == m.max && a.args[0] == u))) {
      return std::nullopt;
    }
    m.lse = add;
    m.lse_tail.push_back(u);
  }
  for (int32_t t = m.lse; t >= 0;) {
    if (users[t].empty()) break;
    if (users[t].size() != 1) return std::nullopt;
    t = users[t][0];
    if (kind(t) != OpKind::kCast && kind(t) != OpKind::kReshape) return std::nullopt;
    m.lse_tail.push_back(t);
  }

  // The epilogue after pv: element-wise work of its shape, then views that
  // lay it out: reshapes, and a permute keeping the last dim last (heads
  // back between tokens and the head dim), each read by the next view
  // alone, the last by nothing.
  const std::vector<Dim>& out = c.nodes[m.pv].type.shape;
  std::set<int32_t> epi;
  for (int32_t id = m.pv + 1; id < count; ++id) {
    const Node& n = c.nodes[id];
    const bool reads = std::any_of(n.args.begin(), n.args.end(),
                                   [&](int32_t a) { return a == m.pv || epi.count(a); });
    if (!reads) continue;
    if (n.kind == OpKind::kReshape || n.kind == OpKind::kPermute) {
      if (n.kind == OpKind::kPermute && n.axes.back() != n.type.rank() - 1) return std::nullopt;
      if (users[id].size() > 1) return std::nullopt;
      if (users[id].size() == 1 && kind(users[id][0]) != OpKind::kReshape &&
          kind(users[id][0]) != OpKind::kPermute) {
        return std::nullopt;
      }
    } else if (!IsElementwise(n.kind) || n.type.shape != out ||
               std::any_of(n.args.begin(), n.args.end(), [&](int32_t a) {
                 return IsView(kind(a)) && epi.count(a);
               })) {
      return std::nullopt;
    }
    epi.insert(id);
  }
  m.epilogue.assign(epi.begin(), epi.end());

  // Every computed node has a role; the softmax's nodes are read only
  // where the pattern reads them.
  std::set<int32_t> group(score.begin(), score.end());
  group.insert(epi.begin(), epi.end());
  group.insert(m.lse_tail.begin(), m.lse_tail.end());
  for (int32_t id : {m.qk, m.pv, m.max, m.sub, m.exp, m.sum, m.div, m.guard, guard_cond, m.p,
                     m.lse}) {
    if (id >= 0) group.insert(id);
  }
  for (int32_t id = 0; id < count; ++id) {
    const OpKind k = kind(id);
    if (k == OpKind::kInput || k == OpKind::kConstant || group.count(id)) continue;
    // Views of inputs read as leaves (operands, side inputs) are not computed.
    if (IsView(k) && std::all_of(users[id].begin(), users[id].end(), [&](int32_t u) {
          return group.count(u) || IsView(kind(u));
        })) {
      continue;
    }
    return std::nullopt;
  }
  auto only = [&](int32_t id, std::initializer_list<int32_t> allowed) {
    return std::all_of(users[id].begin(), users[id].end(), [&](int32_t u) {
      return std::find(allowed.begin(), allowed.end(), u) != allowed.end();
    });
  };
  const int32_t lse_log = m.lse_tail.empty() ? -1 : m.lse_tail[0];
  for (int32_t u : users[m.qk]) {
    if (!score.count(u) && !(m.x == m.qk && (u == m.max || u == m.sub))) return std::nullopt;
  }
  if (!only(m.max, {m.sub, guard_cond, m.lse}) || !only(m.sub, {m.exp}) ||
      !only(m.exp, {m.sum, m.div}) || !only(m.sum, {m.div, lse_log})) {
    return std::nullopt;
  }
  // div -> [guard] -> [cast] -> pv, each read by the next alone.
  std::vector<int32_t> to_pv = {m.div};
  if (m.guard >= 0) to_pv.push_back(m.guard);
  if (m.p != to_pv.back()) to_pv.push_back(m.p);
  to_pv.push_back(m.pv);
  for (size_t i = 0; i + 1 < to_pv.size(); ++i) {
    if (users[to_pv[i]].size() != 1 || users[to_pv[i]][0] != to_pv[i + 1]) return std::nullopt;
  }
  if (guard_cond >= 0 && !only(guard_cond, {m.guard})) return std::nullopt;
  for (int32_t id : score) {
    for (int32_t u : users[id]) {
      if (!score.count(u) && u != m.max && u != m.sub) return std::nullopt;
    }
  }
  for (int32_t u : users[m.x]) {
    if (u != m.max && u != m.sub) return std::nullopt;
  }
  // Outputs: the attention output (pv or its epilogue) and the lse.
  for (int32_t o : c.outputs) {
    const bool ok = o == m.pv || epi.count(o) || o == m.lse ||
                    (std::find(m.lse_tail.begin() + (m.lse_tail.empty() ? 0 : 1), m.lse_tail.end(),
                               o) != m.lse_tail.end());
    if (!ok) return std::nullopt;
  }
  return m;
}

KernelGroup AttentionGroup(const Chain& c, const AttentionMatch& m) {
  KernelGroup g;
  g.family = Family::kAttention;
  std::set<int32_t> nodes(m.score.begin(), m.score.end());
  nodes.insert(m.epilogue.begin(), m.epilogue.end());
  nodes.insert(m.lse_tail.begin(), m.lse_tail.end());
  for (int32_t id : {m.qk, m.pv, m.max, m.sub, m.exp, m.sum, m.div, m.guard, m.p, m.lse}) {
    if (id >= 0) nodes.insert(id);
  }
  if (m.guard >= 0) nodes.insert(c.nodes[m.guard].args[0]);
  g.nodes.assign(nodes.begin(), nodes.end());
  std::set<int32_t> results(c.outputs.begin(), c.outputs.end());
  g.results.assign(results.begin(), results.end());
  // What the score reads besides QK^T, by its type as the composites make
  // them: a boolean mask, integer lengths, a floating bias.
  std::set<int32_t> side;
  for (int32_t id : m.score) {
    for (int32_t a : c.nodes[id].args) {
      // Through the views and casts that shape it to the scores.
      while (!c.nodes[a].args.empty() && c.nodes[a].kind != OpKind::kMatmul &&
             (IsView(c.nodes[a].kind) || c.nodes[a].kind == OpKind::kCast)) {
        a = c.nodes[a].args[0];
      }
      if (c.nodes[a].kind == OpKind::kInput) side.insert(a);
    }
  }
  std::string parts = "QK^T";
  bool masked = m.causal;
  if (m.causal) parts += ", the causal mask";
  for (int32_t a : side) {
    const DType t = c.nodes[a].type.dtype;
    parts += t == DType::kBool ? ", a mask" : IsFloat(t) ? ", a bias" : ", the lengths";
    masked |= !IsFloat(t);
  }
  // A mask of the scores' indices alone (an iota's comparison that is not
  // the causal one).
  const bool selects = std::any_of(m.score.begin(), m.score.end(),
                                   [&](int32_t id) { return c.nodes[id].kind == OpKind::kWhere; });
  if (selects && !masked) parts += ", a mask of the indices";
  g.reason = absl::StrCat("attention: ", parts,
                          ", softmax and PV in one kernel with an online softmax; the scores never reach memory");
  return g;
}

}  // namespace kfuse
