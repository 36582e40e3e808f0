// The row kernel's source text. Layout of the generated kernel:
//
//   kf_team_reduce<T>      warp shuffles, then shared memory across warps
//   kf_phase<p>(x..., r..., y&...)   per element: the operands of phase p's
//                          reductions, from the element's inputs and the row
//                          values known before phase p
//   kf_out(x..., r..., y&...)        per element: the full-row outputs
//   kernel: one team of T threads per row, `rows` teams per block;
//     row coordinates and each input's row base; per-row inputs;
//     resident: each thread loads its vectors of the row once;
//     per phase: a pass over the row (registers, or re-read), accumulate,
//       team-reduce, then the per-row values that follow;
//     a last pass writes full-row outputs; lane 0 writes per-row outputs
//     (of the cluster's first block, for rows split over a cluster).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "codegen/row.h"
#include "codegen/row_plan.h"
#include "core/status.h"

namespace kfuse::row_internal {
namespace {

using Class = RowStructure::Class;

constexpr char kEntryPlaceholder[] = "KF_ENTRY_NAME";

// Looped passes of a static width with at most this many vectors a thread
// are unrolled whole.
constexpr int64_t kUnrolledSteps = 8;

constexpr char kTeamReduce[] = R"(struct kf_sum_op {
  template <typename V> __device__ __forceinline__ V operator()(V a, V b) const { return a + b; }
  // Integer sums wrap (docs/architecture.md): added as unsigned, so no signed overflow.
  __device__ __forceinline__ int operator()(int a, int b) const { return (int)((unsigned)a + (unsigned)b); }
  __device__ __forceinline__ long long operator()(long long a, long long b) const {
    return (long long)((unsigned long long)a + (unsigned long long)b);
  }
};
struct kf_max_op {
  template <typename V> __device__ __forceinline__ V operator()(V a, V b) const { return kf_max(a, b); }
};
struct kf_min_op {
  template <typename V> __device__ __forceinline__ V operator()(V a, V b) const { return kf_min(a, b); }
};
// Every lane of the team gets the same value: each butterfly step combines
// the same two values on both lanes (op is commutative). Teams of more than
// one warp meet in `buf` (kT / 32 slots per team), each warp then reducing
// the slots by the same butterfly; every thread of the block must call it,
// as it synchronises the block.
template <int kT, typename V, typename Op>
__device__ __forceinline__ V kf_team_reduce(V v, V* buf, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (kT > 32) {
    constexpr int kW = kT / 32;
    const int base = (threadIdx.x / kT) * kW;
    if ((threadIdx.x & 31) == 0) buf[base + (threadIdx.x % kT) / 32] = v;
    __syncthreads();
    v = buf[base + (threadIdx.x & (kW - 1))];
#pragma unroll
    for (int o = kW / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}
)";

// L2 eviction policies for rows read from global memory more than once
// (looped rows, and the staging pass of resident=2): the earlier passes
// keep the row (evict_last: a later pass reads it again), its last pass and
// every full-row store let it go (evict_first), so that neither the output
// nor rows done with push out rows still to be re-read. Register-resident
// rows, read once, are plain (the same policies cost them 3-6% on the H200,
// run33), or under policy=1 load with evict_last alone: 2-3.5% faster for
// f32 rows on the H200, 12-15% slower for bf16 ones (run86), so the tuner
// decides. Accesses of 2, 4, 8 or 16 bytes carry the policy; others are
// plain.
constexpr char kCacheHints[] = R"(__device__ __forceinline__ unsigned long long kf_policy(bool keep) {
  unsigned long long p;
  if (keep) {
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  } else {
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  }
  return p;
}
template <typename T>
__device__ __forceinline__ T kf_ldh(const T* p, unsigned long long pol) {
  T v;
  unsigned* u = reinterpret_cast<unsigned*>(&v);
  if constexpr (sizeof(T) == 16) {
    asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(u[0]), "=r"(u[1]), "=r"(u[2]), "=r"(u[3]) : "l"(p), "l"(pol));
  } else if constexpr (sizeof(T) == 8) {
    asm("ld.global.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;" : "=r"(u[0]), "=r"(u[1]) : "l"(p), "l"(pol));
  } else if constexpr (sizeof(T) == 4) {
    asm("ld.global.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(u[0]) : "l"(p), "l"(pol));
  } else if constexpr (sizeof(T) == 2) {
    asm("ld.global.L2::cache_hint.u16 %0, [%1], %2;"
        : "=h"(*reinterpret_cast<unsigned short*>(&v)) : "l"(p), "l"(pol));
  } else {
    v = *p;
  }
  return v;
}
template <typename T>
__device__ __forceinline__ void kf_sth(T* p, const T v, unsigned long long pol) {
  const unsigned* u = reinterpret_cast<const unsigned*>(&v);
  if constexpr (sizeof(T) == 16) {
    asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
                 :: "l"(p), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3]), "l"(pol) : "memory");
  } else if constexpr (sizeof(T) == 8) {
    asm volatile("st.global.L2::cache_hint.v2.u32 [%0], {%1, %2}, %3;"
                 :: "l"(p), "r"(u[0]), "r"(u[1]), "l"(pol) : "memory");
  } else if constexpr (sizeof(T) == 4) {
    asm volatile("st.global.L2::cache_hint.u32 [%0], %1, %2;" :: "l"(p), "r"(u[0]), "l"(pol) : "memory");
  } else if constexpr (sizeof(T) == 2) {
    asm volatile("st.global.L2::cache_hint.u16 [%0], %1, %2;"
                 :: "l"(p), "h"(*reinterpret_cast<const unsigned short*>(&v)), "l"(pol) : "memory");
  } else {
    *p = v;
  }
}
)";

// kf_ldw (the prelude's window) with the pass's L2 policy on both reads.
constexpr char kWindowHinted[] = R"(template <typename T>
__device__ __forceinline__ T kf_ldwh(const void* p, unsigned long long pol) {
  constexpr int N = sizeof(T);
  const kf_words<N>* lo;
  const kf_words<N>* hi;
  const unsigned s = kf_win_at<N>(p, &lo, &hi);
  return kf_win<T, N>(kf_ldh(lo, pol), kf_ldh(hi, pol), s);
}
)";

// Rows split over a cluster of blocks (sm_90): each block's partial value
// meets the others' through distributed shared memory. Every block of the
// cluster combines the partials in rank order, so all get the same value.
// Each reduction has its own slot: the barrier before a slot is read is the
// only one it needs; a block leaves only after the cluster's last reads
// (kf_cluster_arrive after them, kf_cluster_wait at the end). kf_zero is
// the zero of a storage type, for rows held raw. The cluster's barrier and
// loads are the prelude's (PreludeNeeds::cluster).
constexpr char kClusterReduce[] = R"(template <typename T>
__device__ __forceinline__ T kf_zero() { return T(); }
template <int kS, typename V, typename Op>
__device__ __forceinline__ V kf_cluster_reduce(V v, V* slot, Op op) {
  if (threadIdx.x == 0) *slot = v;
  kf_cluster_arrive();
  kf_cluster_wait();
  V r = kf_cluster_ld(slot, 0);
#pragma unroll
  for (unsigned q = 1; q < kS; ++q) r = op(r, kf_cluster_ld(slot, q));
  return r;
}
)";

// Sliced rows (Plan::slices): the row's last block combines the slices'
// values of a reduction (`n` of them from `part`), each thread a strided
// share in slot order, then the team: the same tree at every launch.
constexpr char kSlicesReduce[] = R"(template <int kT, typename V, typename Op>
__device__ __forceinline__ V kf_slices_reduce(const V* part, int n, V v, V* buf, Op op) {
  for (int q = threadIdx.x % kT; q < n; q += kT) v = op(v, __ldcg(part + q));
  return kf_team_reduce<kT>(v, buf, op);
}
)";

// Full-row vector stores of bulk-staged rows: one st.global of the whole
// vector. A plain store of the kf_vec was split into one store per element
// there (8 two-byte stores per bf16 vector, which made the H200 write rows
// at a fifth of the copy bandwidth). Register-resident rows keep plain
// stores, which compile to whole-vector ones (this asm made NVRTC spill a
// few of them).
constexpr char kVecStore[] = R"(template <typename T>
__device__ __forceinline__ void kf_stv(T* p, const T v) {
  const unsigned* u = reinterpret_cast<const unsigned*>(&v);
  if constexpr (sizeof(T) == 16) {
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(u[0]), "r"(u[1]), "r"(u[2]), "r"(u[3]));
  } else if constexpr (sizeof(T) == 8) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(p), "r"(u[0]), "r"(u[1]));
  } else if constexpr (sizeof(T) == 4) {
    asm volatile("st.global.u32 [%0], %1;" :: "l"(p), "r"(u[0]));
  } else {
    *p = v;
  }
}
)";

// Rows staged by bulk copies (resident=3, sm_90): one mbarrier per buffer,
// armed by the thread that issues the copies with their byte count; the
// copies (16 KiB pieces) complete it. Waiting threads poll the buffer's
// phase parity.
constexpr char kBulkCopy[] = R"(__device__ __forceinline__ unsigned kf_sa(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void kf_bar_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(kf_sa(bar)) : "memory");
}
__device__ __forceinline__ void kf_bar_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void kf_bar_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("{\n  .reg .b64 st;\n  mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}"
               :: "r"(kf_sa(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void kf_bulk_load(void* dst, const void* src, long long bytes,
                                             unsigned long long* bar) {
  for (long long o = 0; o < bytes; o += 16384) {
    const unsigned n = static_cast<unsigned>(bytes - o < 16384 ? bytes - o : 16384);
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        :: "r"(kf_sa(static_cast<char*>(dst) + o)), "l"(static_cast<const char*>(src) + o), "r"(n),
           "r"(kf_sa(bar)) : "memory");
  }
}
__device__ __forceinline__ void kf_bar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done = 0;
  while (!done) {
    asm volatile("{\n  .reg .pred p;\n  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "  selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(kf_sa(bar)), "r"(parity) : "memory");
  }
}
)";

// The online softmax's combination of two (max, sum of exp(x - max)) pairs,
// and its team reduction; kf_oexp is the chain's exp (its numerics).
constexpr char kOnlineTemplate[] = R"(__device__ __forceinline__ void kf_ms_merge(float& m, float& s, float m2, float s2) {
  const float mm = kf_max(m, m2);
  s = (m == mm ? s : s * kf_oexp(m - mm)) + (m2 == mm ? s2 : s2 * kf_oexp(m2 - mm));
  m = mm;
}
template <int kT>
__device__ __forceinline__ void kf_team_reduce_ms(float& m, float& s, float* bm, float* bs) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    kf_ms_merge(m, s, m2, s2);
  }
  if (kT > 32) {
    constexpr int kW = kT / 32;
    const int base = (threadIdx.x / kT) * kW;
    if ((threadIdx.x & 31) == 0) {
      bm[base + (threadIdx.x % kT) / 32] = m;
      bs[base + (threadIdx.x % kT) / 32] = s;
    }
    __syncthreads();
    m = bm[base + (threadIdx.x & (kW - 1))];
    s = bs[base + (threadIdx.x & (kW - 1))];
#pragma unroll
    for (int o = kW / 2; o > 0; o >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
      kf_ms_merge(m, s, m2, s2);
    }
  }
}
)";

struct Closure {
  std::vector<int32_t> compute;  // Element-wise nodes (and constants), ascending.
  std::vector<int32_t> inputs;   // Per-element inputs read, ascending.
  std::vector<int32_t> rows;     // Per-row values read, ascending.
  std::vector<int32_t> kept;     // Values an earlier pass kept in registers.
};

class Writer {
 public:
  Writer(const Chain& chain, const Plan& plan) : c_(chain), p_(plan), r_(plan.rows) {
    twin_.assign(c_.nodes.size(), -1);
    pick_.assign(c_.nodes.size(), {-1, -1});
    for (const std::vector<int32_t>& phase : r_.phases) {
      for (size_t i = 0; i < phase.size(); ++i) {
        pick_[phase[i]] = FindPick(phase[i]);
        for (size_t j = 0; j < i && twin_[phase[i]] < 0; ++j) {
          if (twin_[phase[j]] < 0 && Repeats(phase[i], phase[j])) twin_[phase[i]] = phase[j];
        }
      }
    }
  }

  absl::StatusOr<Source> Write() {
    std::string funcs, body;
    KFUSE_RETURN_IF_ERROR(Kernel(&funcs, &body));
    needs_.vec = needs_.vec || p_.vec > 1;
    needs_.window = !p_.window_inputs.empty() && p_.vec > 1;
    needs_.cluster = p_.split > 1;
    Variant v{Family::kRowReduction,
              {{"vec", p_.vec}, {"threads", p_.threads}, {"rows", p_.rows_per_block},
               {"resident", p_.resident_param}}};
    if (p_.split > 1) v.params["split"] = p_.split;
    if (p_.policy) v.params["policy"] = p_.policy;
    if (p_.bulk) {
      v.params["stages"] = p_.stages;
      v.params["grid"] = p_.grid;
      if (p_.dyn) v.params["dyn"] = 1;
    }
    std::string text = absl::StrCat(
        "// Generated by kfuse ", kRowGeneratorVersion, ": rows of width ",
        r_.width.is_static() ? absl::StrCat(r_.width.size) : "symbolic", ", ", r_.phases.size(),
        " reduction phase(s), ", v.ToString(), ", numerics ", NumericsName(p_.numerics), ".\n",
        CudaPrelude(needs_), kTeamReduce, Hinted() || p_.policy ? kCacheHints : "",
        !p_.window_inputs.empty() && (Hinted() || p_.policy) ? kWindowHinted : "",
        p_.split > 1 ? kClusterReduce : "", p_.slices > 1 ? kSlicesReduce : "", p_.bulk ? kBulkCopy : "",
        p_.bulk && HasFullRowOutput() ? kVecStore : "", funcs, body);
    Source src;
    src.entry = absl::StrFormat("kf_row_%012x", SourceHash(text) >> 16);
    src.text = absl::StrReplaceAll(text, {{kEntryPlaceholder, src.entry}});
    return src;
  }

  // The reductions of the one phase a sliced row may have (Plan::slices),
  // or 0: one plain pass (no online pair), per-row outputs only.
  int SlicedReductions() const {
    if (r_.phases.size() != 1 || Own(0).empty() || OnlinePair(0) >= 0) return 0;
    for (int32_t o : c_.outputs) {
      if (r_.cls[o] == Class::kElement) return 0;
    }
    return static_cast<int>(Own(0).size());
  }

  // How many passes over the row the kernel makes: one a phase that
  // accumulates (an online pair counts once), one for full-row outputs.
  int Passes() const {
    int n = 0;
    for (size_t ph = 0; ph < r_.phases.size(); ++ph) {
      if (OnlinePair(ph) >= 0) {
        ++n;
        ++ph;
      } else if (!Own(ph).empty()) {
        ++n;
      }
    }
    for (int32_t o : c_.outputs) {
      if (r_.cls[o] == Class::kElement) return n + 1;
    }
    return n;
  }

 private:
  std::string CT(int32_t id) const { return ComputeType(c_.nodes[id].type.dtype, p_.numerics); }
  bool IsInput(int32_t id) const { return c_.nodes[id].kind == OpKind::kInput; }
  bool IsConst(int32_t id) const { return c_.nodes[id].kind == OpKind::kConstant; }
  // Held once per row in r<id>: per-row nodes and rank-0 inputs.
  bool RowLike(int32_t id) const {
    return r_.cls[id] == Class::kRow || (IsInput(id) && r_.cls[id] == Class::kUniform);
  }

  // What computing `targets` per element needs; values in `kept` (held in
  // registers by an earlier pass) are read, not recomputed.
  Closure Close(const std::vector<int32_t>& targets,
                const std::set<int32_t>& kept = {}) const {
    std::set<int32_t> compute, inputs, rows, held;
    std::vector<int32_t> stack = targets;
    std::set<int32_t> seen;
    while (!stack.empty()) {
      int32_t id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second) continue;
      if (RowLike(id)) {
        rows.insert(id);
      } else if (kept.count(id)) {
        held.insert(id);
      } else if (IsInput(id)) {
        inputs.insert(id);
      } else {
        compute.insert(id);
        for (int32_t a : c_.nodes[id].args) stack.push_back(a);
      }
    }
    return Closure{{compute.begin(), compute.end()},
                   {inputs.begin(), inputs.end()},
                   {rows.begin(), rows.end()},
                   {held.begin(), held.end()}};
  }

  // A device function computing `targets` for one element.
  absl::StatusOr<std::string> PhaseFunction(const std::string& name,
                                            const std::vector<int32_t>& targets,
                                            const Closure& cl) {
    std::vector<std::string> params;
    std::vector<std::string> value(c_.nodes.size());
    for (int32_t id : cl.inputs) {
      params.push_back(absl::StrCat("const ", CT(id), " x", id));
      value[id] = absl::StrCat("x", id);
    }
    for (int32_t id : cl.rows) {
      params.push_back(absl::StrCat("const ", CT(id), " r", id));
      value[id] = absl::StrCat("r", id);
    }
    for (int32_t id : cl.kept) {
      params.push_back(absl::StrCat("const ", CT(id), " h", id));
      value[id] = absl::StrCat("h", id);
    }
    if (ReadsColumn(cl)) params.push_back("const long long kf_col");
    for (size_t k = 0; k < targets.size(); ++k) {
      params.push_back(absl::StrCat(CT(targets[k]), "& y", k));
    }
    std::string body;
    std::vector<std::vector<std::string>> factors(c_.nodes.size());
    for (int32_t id : cl.compute) {
      if (c_.nodes[id].kind == OpKind::kIota) {
        // The element's column, exact in i32 (rows are shorter than 2^31),
        // then rounded to the iota's dtype as a cast rounds.
        value[id] = absl::StrCat("v", id);
        absl::StrAppend(&body, "  const ", CT(id), " v", id, " = ",
                        CastExpr("((int)kf_col)", DType::kI32, c_.nodes[id].type.dtype,
                                 p_.numerics, &needs_),
                        ";\n");
        continue;
      }
      std::vector<std::string> args;
      for (int32_t a : c_.nodes[id].args) {
        KFUSE_CHECK(!value[a].empty());
        args.push_back(value[a]);
      }
      std::string e;
      const Node& n = c_.nodes[id];
      int32_t inner = -1;
      if (F32Product(id)) {
        inner = InnerProduct(id, factors);
        factors[id] = args;
      }
      const int32_t divisor = n.kind == OpKind::kDiv ? n.args[1] : -1;
      if (inner >= 0) {
        // A norm's x * r * w: one rounding, not eager's two, so its error
        // against fp64 stays within eager's (run94: the residual RMSNorm's
        // output was a draw between the same two roundings).
        needs_.mul3 = true;
        const std::string& other = args[n.args[0] == inner ? 1 : 0];
        e = absl::StrCat("kf_mul3(", factors[inner][0], ", ", factors[inner][1], ", ", other, ")");
      } else if (divisor >= 0 && p_.numerics == Numerics::kFast && RowLike(divisor) &&
          (n.type.dtype == DType::kBF16 || n.type.dtype == DType::kF16) &&
          CT(id) == "float" && CT(divisor) == CT(id) && CT(n.args[0]) == CT(id)) {
        // A 16-bit quotient by a per-row value: one reciprocal per row (the
        // compiler hoists it out of the unrolled pass), a multiply per
        // element; within 1.5 ulp of f32's quotient, far inside the
        // result's rounding. Wider quotients divide, as eager does (the
        // product's extra rounding is one eager does not take).
        e = absl::StrCat("(", args[0], " * ((", CT(id), ")1 / ", args[1], "))");
      } else {
        KFUSE_ASSIGN_OR_RETURN(e, EmitOpExpr(c_, id, args, p_.numerics, &needs_));
      }
      value[id] = absl::StrCat("v", id);
      absl::StrAppend(&body, "  const ", CT(id), " v", id, " = ", e, ";\n");
    }
    for (size_t k = 0; k < targets.size(); ++k) {
      absl::StrAppend(&body, "  y", k, " = ", value[targets[k]], ";\n");
    }
    return absl::StrCat("__device__ ", ElementFnQualifier(static_cast<int>(cl.compute.size())), " void ", name,
                        "(", absl::StrJoin(params, ", "), ") {\n", body, "}\n");
  }

  // Whether an element function computes an iota: its column (kf_c + kf_e
  // in every pass) is a parameter.
  bool ReadsColumn(const Closure& cl) const {
    return std::any_of(cl.compute.begin(), cl.compute.end(),
                       [&](int32_t id) { return c_.nodes[id].kind == OpKind::kIota; });
  }

  // An f32 product of f32 factors, computed in float under fast numerics.
  bool F32Product(int32_t id) const {
    const Node& n = c_.nodes[id];
    if (n.kind != OpKind::kMul || n.type.dtype != DType::kF32 || CT(id) != "float" ||
        p_.numerics != Numerics::kFast) {
      return false;
    }
    return CT(n.args[0]) == "float" && CT(n.args[1]) == "float";
  }

  // The factor of product `id` that is itself a product computed in the
  // same element function (its factors recorded), or -1.
  int32_t InnerProduct(int32_t id, const std::vector<std::vector<std::string>>& factors) const {
    for (int32_t a : c_.nodes[id].args) {
      if (!factors[a].empty()) return a;
    }
    return -1;
  }

  // Whether the kernel's row-varying loads and full-row stores carry L2
  // policies (kCacheHints): rows read from global memory more than once.
  bool Hinted() const { return !p_.resident && !p_.bulk; }

  bool HasFullRowOutput() const {
    for (int32_t o : c_.outputs) {
      if (r_.cls[o] == Class::kElement) return true;
    }
    return false;
  }

  // Split rows hold their inputs in the storage type (a bf16 row in half the
  // registers), converted where they are used.
  bool Raw() const { return p_.split > 1; }

  // Registers a resident row holds per value: its vectors, and the tail's
  // element of a peeled row.
  int Slots() const { return p_.items * p_.vec + (p_.peel ? 1 : 0); }

  bool Held(int32_t id) const {
    return p_.resident &&
           std::find(p_.held_inputs.begin(), p_.held_inputs.end(), id) != p_.held_inputs.end();
  }

  // Inside a pass: held inputs are x<id>[KF_X] (the element's slot in the
  // registers), the others x<id>[kf_e] (the vector the pass just loaded).
  std::string Call(const std::string& name, const Closure& cl,
                   const std::vector<std::string>& outs) {
    std::vector<std::string> args;
    for (int32_t id : cl.inputs) {
      const std::string x = absl::StrCat("x", id, Held(id) ? "[KF_X]" : "[kf_e]");
      args.push_back(Held(id) && Raw() ? Load(x, id) : x);
    }
    for (int32_t id : cl.rows) args.push_back(absl::StrCat("r", id));
    for (int32_t id : cl.kept) args.push_back(absl::StrCat("h", id, "[KF_X]"));
    if (ReadsColumn(cl)) args.push_back("(kf_c + kf_e)");
    for (const std::string& o : outs) args.push_back(o);
    return absl::StrCat(name, "(", absl::StrJoin(args, ", "), ");");
  }

  // Element offset of row coordinate 0.. of input node `id` (its last dim
  // excluded when it is the row's W): by its strides, dense or given.
  std::string Base(int32_t id) const {
    const Node& n = c_.nodes[id];
    const int frame = static_cast<int>(r_.row_shape.size()) - (r_.reduced_frame[id] ? 1 : 0);
    const int off = frame - n.type.rank();
    std::vector<std::string> terms;
    for (int d = 0; d < n.type.rank(); ++d) {
      const int fd = off + d;
      if (fd >= static_cast<int>(r_.row_shape.size()) - 1) continue;  // The W axis.
      if (n.type.shape[d] == Dim::Static(1)) continue;
      if (!n.strides.empty()) {
        if (n.strides[d] != 0) terms.push_back(absl::StrCat("kf_c", fd, " * ", n.strides[d], "LL"));
        continue;
      }
      std::vector<std::string> f = {absl::StrCat("kf_c", fd)};
      for (int e = d + 1; e < n.type.rank(); ++e) {
        if (n.type.shape[e] != Dim::Static(1)) f.push_back(DimCode(n.type.shape[e]));
      }
      terms.push_back(absl::StrJoin(f, " * "));
    }
    if (n.offset != 0) terms.push_back(absl::StrCat(n.offset, "LL"));
    return terms.empty() ? "0LL" : absl::StrJoin(terms, " + ");
  }

  // The element offset of column `col` of input `id`'s row from the row's
  // start: `col` where the row's elements are consecutive, else times their
  // stride (read at vec 1 only: MakePlan).
  std::string Column(int32_t id, const std::string& col) const {
    const Node& n = c_.nodes[id];
    if (n.strides.empty() || n.strides.back() == 1) return col;
    return absl::StrCat(col, " * ", n.strides.back(), "LL");
  }

  // An input's type in memory: its buffer's (StorageDType), or double for
  // an earlier kernel's result read by the yardstick, which the kernels
  // writing it in kReference64 write so (ReferenceReadsIntermediatesAsDouble).
  bool Wide(int32_t id) const {
    return IsInput(id) && c_.nodes[id].storage != DType::kInvalid &&
           p_.numerics == Numerics::kReference64;
  }
  std::string Storage(int32_t id) const {
    return Wide(id) ? "double" : std::string(DTypeStorage(StorageDType(c_.nodes[id])));
  }
  // Input `id`'s value `e`, held in Storage(id), in its compute type.
  std::string Load(const std::string& e, int32_t id) {
    return Wide(id) ? LoadDoubleExpr(e, c_.nodes[id].type.dtype)
                    : LoadExpr(e, StorageDType(c_.nodes[id]), p_.numerics, &needs_);
  }

  // Where a pass reads an input's column kf_c from: global memory, global
  // memory and then a copy into the row's shared-memory stage (the first
  // pass of a resident=2 row), or the stage (later passes).
  enum class Src { kGlobal, kGlobalAndStage, kStage, kEdge };

  // Loads the `vec` elements from column kf_c of input `id` into
  // dst[first + e].
  std::string LoadVec(int32_t id, const std::string& dst, const std::string& first,
                      const std::string& indent, int vec, Src src = Src::kGlobal,
                      bool raw = false) {
    const Node& n = c_.nodes[id];
    if (src == Src::kEdge) {  // A bulk-staged row's column, loaded at the row's start.
      return absl::StrCat(indent, dst, "[", first, "] = ",
                          Load(absl::StrCat("kf_edge", id), id),
                          ";\n");
    }
    // raw: dst holds the storage type, converted where it is used.
    auto convert = [&](const std::string& e) {
      return raw ? e : Load(e, id);
    };
    const bool windowed = Windowed(id);
    // A bulk-staged window input's row starts kf_sh<id> into its buffer.
    const std::string stage = absl::StrCat("kf_s", id, " + kf_so + kf_c",
                                           windowed && p_.bulk ? absl::StrCat(" + kf_sh", id) : "");
    const std::string at = src == Src::kStage
                               ? stage
                               : absl::StrCat("in", n.input_index, " + kf_b", id, " + ", Column(id, "kf_c"));
    // A row-varying input read from global memory carries the pass's policy
    // (resident rows under policy=1: kf_keep).
    const bool hinted = src != Src::kStage && (pass_ >= 0 || p_.policy == 1) &&
                        std::find(p_.held_inputs.begin(), p_.held_inputs.end(), id) !=
                            p_.held_inputs.end();
    // A staged row is read from global memory once; a looped row's last
    // pass that reads it lets it go.
    const auto last = last_read_.find(id);
    const std::string policy =
        src == Src::kGlobalAndStage || (last != last_read_.end() && last->second == pass_)
            ? "kf_stream"
            : "kf_keep";
    // An input off the dense rows' phase: its vectors through windows, from
    // global memory, or from a bulk copy of the row (a stage the kernel
    // writes itself keeps the dense rows' phase).
    const bool window = vec > 1 && windowed && (src != Src::kStage || p_.bulk);
    auto read = [&](const std::string& type) {
      if (window) {
        return hinted ? absl::StrCat("kf_ldwh<", type, ">(", at, ", ", policy, ")")
                      : absl::StrCat("kf_ldw<", type, ">(", at, ")");
      }
      return hinted ? absl::StrCat("kf_ldh(reinterpret_cast<const ", type, "*>(", at, "), ",
                                   policy, ")")
                    : absl::StrCat("*reinterpret_cast<const ", type, "*>(", at, ")");
    };
    // Rows past kf_R (a block's last teams) read row 0 (RowBases clamps
    // kf_t), and nothing of theirs is stored, so a pass that re-reads the
    // row loads without a guard: under `if (kf_valid)` each load was a
    // branch that ptxas if-converted or not by the block's size, and with
    // 64-bit addressing it did not, so a looped pass's second load waited
    // for the first (the H200's run97: bf16 RMSNorm 8192 looped at 512
    // threads, 146.8 us against 132.6 with 32-bit indices, whose loads were
    // predicated). Register-resident rows keep the guard and its zeros:
    // their loads were predicated, and without it they take more registers
    // (37 against 32 at 512 threads).
    const bool guard = p_.resident;
    const std::string zero =
        raw ? absl::StrCat("kf_zero<", Storage(id), ">()") : absl::StrCat("(", CT(id), ")0");
    const auto zeros = [&](int n) {
      return n == 1 ? absl::StrCat(indent, "  ", dst, "[", first, "] = ", zero, ";\n")
                    : absl::StrCat(indent, "#pragma unroll\n", indent, "  for (int kf_e = 0; kf_e < ",
                                   n, "; ++kf_e) ", dst, "[", first, " + kf_e] = ", zero, ";\n");
    };
    const std::string open = absl::StrCat(indent, guard ? "if (kf_valid) {\n" : "{\n");
    const auto close = [&](int n) {
      return guard ? absl::StrCat(indent, "} else {\n", zeros(n), indent, "}\n")
                   : absl::StrCat(indent, "}\n");
    };
    if (vec == 1 && src != Src::kGlobalAndStage) {
      return absl::StrCat(indent, dst, "[", first, "] = ", guard ? "kf_valid ? " : "",
                          convert(hinted ? read(Storage(id)) : absl::StrCat("(", at, ")[0]")),
                          guard ? absl::StrCat(" : ", zero) : "", ";\n");
    }
    if (vec == 1) {
      return absl::StrCat(open, indent, "  const ", Storage(id), " kf_u = ", read(Storage(id)),
                          ";\n", indent, "  (", stage, ")[0] = kf_u;\n", indent, "  ", dst, "[",
                          first, "] = ", Load("kf_u", id),
                          ";\n", close(1));
    }
    const std::string vt = absl::StrCat("kf_vec<", Storage(id), ", ", vec, ">");
    std::string s = absl::StrCat(open, indent, "  const ", vt, " kf_t = ", read(vt), ";\n");
    if (src == Src::kGlobalAndStage) {
      absl::StrAppend(&s, indent, "  *reinterpret_cast<", vt, "*>(", stage, ") = kf_t;\n");
    }
    absl::StrAppend(&s, indent, "#pragma unroll\n", indent, "  for (int kf_e = 0; kf_e < ", vec,
                    "; ++kf_e) ", dst, "[", first, " + kf_e] = ", convert("kf_t.v[kf_e]"), ";\n",
                    close(vec));
    return s;
  }

  // What a pass does per vector of `vec` columns from kf_c: `pre` and
  // `post` once, `inner` per element (kf_e).
  struct PassBody {
    std::string pre, inner, post;
  };
  using BodyFn = std::function<PassBody(int vec)>;

  bool Windowed(int32_t id) const { return p_.Windowed(id); }

  bool Staged(int32_t id) const {
    return p_.stage_bytes > 0 &&
           std::find(p_.held_inputs.begin(), p_.held_inputs.end(), id) != p_.held_inputs.end();
  }

  // One vector of a pass: the loads of inputs not held, then the body.
  std::string Vector(const std::vector<int32_t>& loads, const BodyFn& make, int vec,
                     const std::string& indent) {
    std::string s;
    for (int32_t id : loads) {
      if (Held(id)) continue;
      // Bulk-staged rows hold their vectors; a peeled row's columns
      // around them were loaded at the row's start (BulkRowStart).
      const Src src = !Staged(id)         ? Src::kGlobal
                      : p_.bulk           ? (vec == p_.vec ? Src::kStage : Src::kEdge)
                      : staged_.count(id) ? Src::kStage
                                          : Src::kGlobalAndStage;
      absl::StrAppend(&s, indent, CT(id), " x", id, "[", vec, "];\n",
                      LoadVec(id, absl::StrCat("x", id), "0", indent, vec, src));
    }
    // Values kept over the staged input's slot are read where it was (a
    // float over a float: the input's stage load serves).
    for (int32_t t : kept_now_) {
      if (!stage_kept_.count(t)) continue;
      absl::StrAppend(&s, indent, CT(t), " h", t, "[", vec, "];\n",
                      vec == p_.vec ? LoadVec(p_.held_inputs[0], absl::StrCat("h", t), "0", indent,
                                              vec, Src::kStage)
                                    : absl::StrCat(indent, "h", t, "[0] = kf_he", t, ";\n"));
    }
    const PassBody b = make(vec);
    absl::StrAppend(&s, b.pre, "#pragma unroll\n      for (int kf_e = 0; kf_e < ", vec,
                    "; ++kf_e) {\n", b.inner, "      }\n", b.post);
    return s;
  }

  // A pass over the row. Resident: each thread's vectors, unrolled. Looped:
  // a loop over the row's vectors; a peeled row (its width not a multiple
  // of the vector) starts the loop at the first aligned column and does the
  // row's few remaining columns at both ends one by one.
  std::string Pass(const std::vector<int32_t>& loads, const BodyFn& make) {
    std::string s = PassText(loads, make);
    for (int32_t id : loads) {
      if (Staged(id)) staged_.insert(id);  // Later passes read the stage.
    }
    return s;
  }

  // A resident row's loop over a thread's vectors: body(vec, indent) for
  // each, with KF_X the element's register slot. A peeled or split row (see
  // ResidentIndices) holds its aligned vectors, the block's share of them,
  // and one more element a thread for the columns around them.
  std::string ResidentLoop(const std::function<std::string(int, const std::string&)>& body) {
    const int v = p_.vec;
    std::string s;
    if (!p_.peel && p_.split == 1) {
      absl::StrAppend(&s, "#pragma unroll\n  for (int kf_i = 0; kf_i < ", p_.items,
                      "; ++kf_i) {\n    const long long kf_c = ((long long)kf_i * ", p_.threads,
                      " + kf_lane) * ", v, ";\n    if (kf_c < kf_W) {\n", body(v, "      "),
                      "    }\n  }\n");
      return absl::StrReplaceAll(s, {{"KF_X", absl::StrCat("kf_i * ", v, " + kf_e")}});
    }
    const std::string share =
        p_.split > 1 ? absl::StrCat("kf_j < ", p_.split_vectors, " && ") : "";
    absl::StrAppend(&s, "#pragma unroll\n  for (int kf_i = 0; kf_i < ", p_.items,
                    "; ++kf_i) {\n    const long long kf_j = (long long)kf_i * ", p_.threads,
                    " + kf_lane;\n    const long long kf_c = kf_h + (kf_v0 + kf_j) * ", v,
                    ";\n    if (", share, "kf_v0 + kf_j < kf_nv) {\n", body(v, "      "),
                    "    }\n  }\n");
    s = absl::StrReplaceAll(s, {{"KF_X", absl::StrCat("kf_i * ", v, " + kf_e")}});
    if (p_.peel) {
      std::string tail;
      absl::StrAppend(&tail, "  if (kf_edge && kf_lane < kf_W - kf_nv * ", v,
                      ") {\n    const long long kf_c = kf_lane < kf_h ? kf_lane : kf_lane + kf_nv * ",
                      v, ";\n", body(1, "    "), "  }\n");
      absl::StrAppend(&s, absl::StrReplaceAll(tail, {{"KF_X", absl::StrCat(p_.items * v,
                                                                           " + kf_e")}}));
    }
    return s;
  }

  // A peeled row's columns before its first vector (the element offset of
  // the row the bases address, brought to a multiple of p_.align): row 0
  // for rows past kf_R, whose loads are unguarded in looped passes (a head
  // of their own row's alignment misaligned them: GpuRowTest, run98).
  std::string PeelHead() const {
    const int a = p_.align;
    return absl::StrCat("(", a, " - (kf_valid ? kf_r : 0) * kf_W % ", a, ") % ", a);
  }

  // A peeled or split resident row: kf_h columns before its first aligned
  // vector, kf_nv aligned vectors, the block's first vector kf_v0, and
  // whether this block holds the columns outside the vectors (kf_edge).
  std::string ResidentIndices() const {
    const int v = p_.vec;
    std::string s = absl::StrCat(
        "  const long long kf_h = ",
        p_.peel ? PeelHead() : "0LL",
        ";\n  const long long kf_nv = (kf_W - kf_h) / ", v, ";\n");
    if (p_.split > 1) {
      absl::StrAppend(&s, "  const unsigned kf_q = kf_cluster_rank();\n",
                      "  const long long kf_v0 = (long long)kf_q * ", p_.split_vectors,
                      ";\n  const bool kf_edge = kf_q == ", p_.split - 1, ";\n");
    } else {
      absl::StrAppend(&s, "  const long long kf_v0 = 0;\n  const bool kf_edge = true;\n");
    }
    return s;
  }

  std::string PassText(const std::vector<int32_t>& loads, const BodyFn& make) {
    std::string s;
    const int v = p_.vec;
    // A looped pass: a few vectors in flight per thread.
    const char* unroll = "#pragma unroll 4\n";
    if (p_.resident) {
      return ResidentLoop([&](int vec, const std::string& indent) {
        return Vector(loads, make, vec, indent);
      });
    }
    // A static width of few vectors a thread: every step unrolled, each
    // guarded, so that all of a pass's loads are issued at once (a loop of
    // unknown count under `unroll 4` left two steps to its remainder loop,
    // one load at a time: the H200's run90).
    const int64_t steps =
        r_.width.is_static() ? (r_.width.size / v + p_.threads - 1) / p_.threads : 0;
    // The fp64 yardstick keeps its plain loop.
    const bool unrolled = steps > 0 && steps <= kUnrolledSteps &&
                          p_.numerics != Numerics::kReference64 && p_.slices == 1;
    if (!p_.peel && unrolled) {
      absl::StrAppend(&s, "  {\n", p_.stage_bytes > 0 ? "    const long long kf_so = 0;\n" : "",
                      "#pragma unroll\n  for (int kf_i = 0; kf_i < ", steps,
                      "; ++kf_i) {\n    const long long kf_c = ((long long)kf_i * ", p_.threads,
                      " + kf_lane) * ", v, ";\n    if (kf_c < kf_W) {\n",
                      Vector(loads, make, v, "    "), "    }\n  }\n  }\n");
      return absl::StrReplaceAll(s, {{"KF_X", "kf_e"}});
    }
    if (!p_.peel) {
      const bool sliced = p_.slices > 1;
      absl::StrAppend(&s, "  {\n", p_.stage_bytes > 0 ? "    const long long kf_so = 0;\n" : "",
                      unroll, "  for (long long kf_c = ", sliced ? "kf_lo + " : "", "(long long)kf_lane * ", v,
                      "; kf_c < ", sliced ? "kf_hi" : "kf_W", "; kf_c += ", int64_t{p_.threads} * v, ") {\n",
                      Vector(loads, make, v, "    "), "  }\n  }\n");
      return absl::StrReplaceAll(s, {{"KF_X", "kf_e"}});
    }
    // The stage keeps vectors aligned: column c at kf_so + c (a bulk
    // stage starts at the first vector).
    absl::StrAppend(&s, "  {\n    const long long kf_h = ", PeelHead(),
                    ";\n    const long long kf_nv = (kf_W - kf_h) / ", v, ";\n",
                    p_.bulk             ? "    const long long kf_so = -kf_h;\n"
                    : p_.stage_bytes > 0 ? absl::StrCat("    const long long kf_so = (", v,
                                                        " - kf_h) % ", v, ";\n")
                                         : "",
                    unrolled ? absl::StrCat("#pragma unroll\n    for (int kf_i = 0; kf_i < ", steps,
                                            "; ++kf_i) {\n    const long long kf_j = (long long)kf_i * ",
                                            p_.threads, " + kf_lane;\n    if (kf_j < kf_nv) {\n")
                             : absl::StrCat(unroll, "    for (long long kf_j = kf_lane; kf_j < kf_nv; kf_j += ",
                                            p_.threads, ") {\n"),
                    "    const long long kf_c = kf_h + kf_j * ", v, ";\n",
                    Vector(loads, make, v, "    "), unrolled ? "    }\n" : "",
                    "    }\n    for (long long kf_k = kf_lane; kf_k < kf_W - kf_nv * ", v,
                    "; kf_k += ", p_.threads, ") {\n    const long long kf_c = kf_k < kf_h ? kf_k "
                    ": kf_k + kf_nv * ", v, ";\n", Vector(loads, make, 1, "    "), "    }\n  }\n");
    return absl::StrReplaceAll(s, {{"KF_X", "kf_e"}});
  }

  // Phases ph and ph + 1 as one pass: phase ph is max(t) alone, phase
  // ph + 1 is sum(exp(t - max)) alone, in float, on a looped row (where a
  // pass costs a read of the row). Returns the exp node, or -1.
  int32_t OnlinePair(size_t ph) const {
    if (p_.resident || !stage_kept_.empty() || p_.numerics != Numerics::kFast ||
        ph + 1 >= r_.phases.size() || Own(ph).size() != 1 || Own(ph + 1).size() != 1) {
      return -1;
    }
    const int32_t m = Own(ph)[0], sum = Own(ph + 1)[0];
    const Node &mn = c_.nodes[m], &sn = c_.nodes[sum];
    if (mn.kind != OpKind::kReduceMax || sn.kind != OpKind::kReduceSum || CT(m) != "float" ||
        CT(sum) != "float") {
      return -1;
    }
    const int32_t e = sn.args[0];
    if (c_.nodes[e].kind != OpKind::kExp || CT(e) != "float") return -1;
    const Node& u = c_.nodes[c_.nodes[e].args[0]];
    if (u.kind != OpKind::kSub || u.args[0] != mn.args[0] || u.args[1] != m ||
        CT(c_.nodes[e].args[0]) != "float") {
      return -1;
    }
    return e;
  }

  // The earlier reduction of `red`'s phase that `red` repeats but for
  // keepdim (a max kept for x - max and dropped for a log-sum-exp), whose
  // result it reads; -1 if none.
  int32_t Twin(int32_t red) const { return twin_[red]; }
  bool Repeats(int32_t a, int32_t b) const {
    const Node &n = c_.nodes[a], &m = c_.nodes[b];
    return m.kind == n.kind && m.args == n.args && m.axes == n.axes &&
           m.type.dtype == n.type.dtype;
  }
  std::pair<int32_t, int32_t> Pick(int32_t red) const { return pick_[red]; }

  // A row's element at a per-row column: sum(where(iota == v, x, 0)) over
  // the row, v one value a row (a class label) and x an input or a value
  // computed element by element from inputs and per-row values, not from
  // the column (an ATen trace's log_softmax before its nll_loss). Returns x
  // and v ({-1, -1} if `red` is no such sum); the kernel reads the inputs at
  // that one column and computes x there, instead of comparing every column
  // (four instructions an element, and a pass of its own when x needs a
  // per-row value of an earlier phase).
  std::pair<int32_t, int32_t> FindPick(int32_t red) const {
    const Node& n = c_.nodes[red];
    if (n.kind != OpKind::kReduceSum) return {-1, -1};
    const Node& w = c_.nodes[n.args[0]];
    if (w.kind != OpKind::kWhere || !IsConst(w.args[2]) || c_.nodes[w.args[2]].value != 0 ||
        r_.cls[w.args[1]] != Class::kElement || c_.nodes[w.args[1]].type.dtype != n.type.dtype ||
        (!IsInput(w.args[1]) && ReadsColumn(Close({w.args[1]})))) {
      return {-1, -1};
    }
    const Node& eq = c_.nodes[w.args[0]];
    if (eq.kind != OpKind::kEq) return {-1, -1};
    for (int k = 0; k < 2; ++k) {
      const int32_t iota = eq.args[k], v = eq.args[1 - k];
      if (c_.nodes[iota].kind == OpKind::kIota && c_.nodes[iota].type.dtype == DType::kI32 &&
          c_.nodes[v].type.dtype == DType::kI32 && r_.cls[v] == Class::kRow && !IsConst(v)) {
        return {w.args[1], v};
      }
    }
    return {-1, -1};
  }

  // The reductions of phase `ph` the passes accumulate: not twins, not picks.
  std::vector<int32_t> Own(size_t ph) const {
    std::vector<int32_t> own;
    for (int32_t red : r_.phases[ph]) {
      if (Twin(red) < 0 && Pick(red).first < 0) own.push_back(red);
    }
    return own;
  }

  // The twins of phase `ph`, read from the reductions they repeat.
  std::string TwinValues(size_t ph) const {
    std::string s;
    for (int32_t red : r_.phases[ph]) {
      if (const int32_t t = Twin(red); t >= 0) {
        absl::StrAppend(&s, "  const ", CT(red), " r", red, " = r", t, ";\n");
      }
    }
    return s;
  }

  // The picks of phase `ph` (twins aside), once the per-row values of level
  // `ph` are known: the inputs they read loaded at the row's column r<v>,
  // nothing for a column outside the row (as no iota equals it).
  absl::Status PickValues(size_t ph, std::string* funcs, std::string* s) {
    if (ph >= r_.phases.size()) return absl::OkStatus();
    for (int32_t red : r_.phases[ph]) {
      const std::pair<int32_t, int32_t> pick = Pick(red);
      const int32_t x = pick.first, v = pick.second;
      if (x < 0 || Twin(red) >= 0) continue;
      const std::string in_row =
          absl::StrCat("kf_valid && r", v, " >= 0 && r", v, " < kf_W");
      auto at = [&](int32_t id) {
        return Load(absl::StrCat("(in", c_.nodes[id].input_index, " + kf_b", id, " + ",
                                 Column(id, absl::StrCat("r", v)), ")[0]"),
                    id);
      };
      if (IsInput(x)) {
        absl::StrAppend(s, "  const ", CT(red), " r", red, " = ", in_row, " ? ", at(x), " : (",
                        CT(red), ")0;\n");
        continue;
      }
      const Closure cl = Close({x});
      const std::string name = absl::StrCat("kf_pick", red);
      KFUSE_ASSIGN_OR_RETURN(std::string f, PhaseFunction(name, {x}, cl));
      absl::StrAppend(funcs, f);
      std::vector<std::string> args;
      for (int32_t id : cl.inputs) args.push_back(at(id));
      for (int32_t id : cl.rows) args.push_back(absl::StrCat("r", id));
      args.push_back(absl::StrCat("r", red));
      absl::StrAppend(s, "  ", CT(red), " r", red, " = (", CT(red), ")0;\n  if (", in_row, ") ",
                      name, "(", absl::StrJoin(args, ", "), ");\n");
    }
    return absl::OkStatus();
  }

  // The per-row values of `level`, then the picks that need no later ones.
  absl::Status RowAndPickValues(int level, std::string* funcs, std::string* s) {
    KFUSE_RETURN_IF_ERROR(RowValues(level, s));
    return PickValues(static_cast<size_t>(level), funcs, s);
  }

  // Sums in floating point whose threads add many elements each (a looped
  // row, or a register-resident one of more than 64 per thread) are
  // compensated, but for those added in double (AccumulatorType); eager
  // numerics keep PyTorch's plain order.
  bool Compensated(int32_t red) const {
    const OpKind k = c_.nodes[red].kind;
    const std::string t = CT(red);
    // A 16-bit result rounds far above what an f32 sum of a thread's share
    // loses (its 8 or 11 bits against 24), so its sum goes uncompensated:
    // four instructions an element fewer.
    const bool narrow = t == "float" && c_.nodes[red].type.dtype != DType::kF32;
    return (k == OpKind::kReduceSum || k == OpKind::kReduceMean) &&
           (t == "float" || t == "double") && !narrow && p_.numerics != Numerics::kEager &&
           (!p_.resident || p_.items * p_.vec > 64) && !InDouble(red);
  }

  // f32 sums whose threads' values meet in double: the float tree's
  // roundings were most of an f32 softmax's error against fp64, which
  // exceeded eager's (H200, run93: 4.13e-9 against eager's 3.1e-9 over
  // 32768 rows of 4096; 1.94e-9 meeting in double). 16-bit results round
  // far above it; eager numerics keep PyTorch's plain order.
  bool Widened(int32_t red) const {
    const OpKind k = c_.nodes[red].kind;
    return (k == OpKind::kReduceSum || k == OpKind::kReduceMean) && CT(red) == "float" &&
           c_.nodes[red].type.dtype == DType::kF32 && p_.numerics != Numerics::kEager;
  }

  // Whether a thread adds `red` in double: a widened sum the kernel writes
  // as it is (a chain output, or a row result a later kernel sums again;
  // itself or a twin that repeats it), or only plus or minus other values
  // (AddedIntoAnOutput). Its float partials were several ulps off, and a
  // reduction over the stored rows adds those errors up: a total over
  // [3, 1027, 1000] reached 2.6x eager's error (H100, run208). Compensation
  // does not serve it either where terms cancel: a 1-D total of 4M terms of
  // +-50 summing to -101 came out 4e-3 to 0.15 off in every looped variant
  // (H100, run232; eager's cascade 3.6e-6), even at four terms a thread:
  // Kahan's correction (s - a) - d is exact only while the running sum
  // outweighs the term, which a sum of terms of either sign keeps breaking.
  // Sums used only inside the row (a softmax's divisor, a norm's mean)
  // keep float partials, compensated where long, as does the online pass's
  // sum (OnlinePass: a log-sum-exp's, compensated past 64 terms a lane).
  bool InDouble(int32_t red) const { return Widened(red) && AddedIntoAnOutput(red); }

  // The type a thread accumulates `red` in.
  std::string AccumulatorType(int32_t red) const { return InDouble(red) ? "double" : CT(red); }

  // Whether an output is `red` (or a twin that repeats it) plus or minus
  // other values: reached from it by adds, subtractions, negations, casts
  // to float types and views alone. There the output's error is the sum's
  // own, and a difference that cancels (x.sum() - x.amax()) shows every ulp
  // it lost: the second kernel of such a total, adding 1024 stored row sums
  // in float partials, was 4.3x eager's error on an H200 (run214). A sum
  // that scales or divides keeps its relative error, which float partials
  // hold to a few ulps.
  bool AddedIntoAnOutput(int32_t red) const {
    std::vector<bool> reaches(c_.nodes.size(), false);
    for (size_t id = 0; id < c_.nodes.size(); ++id) {
      const Node& n = c_.nodes[id];
      const int32_t i = static_cast<int32_t>(id);
      if (i == red || Twin(i) == red) {
        reaches[id] = true;
        continue;
      }
      const OpKind k = n.kind;
      const bool additive = k == OpKind::kAdd || k == OpKind::kSub || k == OpKind::kNeg ||
                            k == OpKind::kReshape || k == OpKind::kExpand ||
                            k == OpKind::kPermute ||
                            (k == OpKind::kCast && IsFloat(n.type.dtype));
      if (!additive) continue;
      for (int32_t a : n.args) reaches[id] = reaches[id] || reaches[a];
    }
    for (int32_t o : c_.outputs) {
      if (reaches[o]) return true;
    }
    return false;
  }

  // The type the threads' values of reduction `red` meet in.
  std::string MeetType(int32_t red) const { return Widened(red) ? "double" : CT(red); }

  // Sliced rows: reduction `red`'s slots for the row (8 bytes each, one a
  // slice of the launch), after those of the reductions before it in its
  // phase.
  std::string SlicePart(int32_t red, bool write = false) const {
    const std::vector<int32_t> own = Own(0);
    const int64_t j = std::find(own.begin(), own.end(), red) - own.begin();
    return absl::StrCat("reinterpret_cast<", write ? "" : "const ", MeetType(red), "*>(kf_ws + ((long long)", j,
                        " * kf_R + kf_r) * gridDim.y * 8)");
  }

  // Sliced rows: each block's values to its slots, then a count of the
  // row's blocks done; every block but the last leaves.
  std::string SlicesMeet(const std::vector<int32_t>& own) const {
    std::string s = "  if (threadIdx.x == 0) {\n";
    for (int32_t red : own) {
      absl::StrAppend(&s, "    ", SlicePart(red, /*write=*/true), "[blockIdx.y] = b", red, ";\n");
    }
    absl::StrAppend(&s, "  }\n  __threadfence();\n  __syncthreads();\n  __shared__ bool kf_last;\n",
                    "  if (threadIdx.x == 0) kf_last = atomicAdd(kf_cnt + kf_r, 1u) == gridDim.y - 1;\n",
                    "  __syncthreads();\n  if (!kf_last) return;\n  __threadfence();\n");
    return s;
  }

  // a + b in reduction `red`'s accumulator: integers add as unsigned, so a
  // sum that wraps (docs/architecture.md) is no signed overflow.
  std::string Sum(int32_t red, const std::string& a, const std::string& b) const {
    const std::string t = AccumulatorType(red);
    if (t == "int") return absl::StrCat("(int)((unsigned)", a, " + (unsigned)", b, ")");
    if (t == "long long") {
      return absl::StrCat("(long long)((unsigned long long)", a, " + (unsigned long long)", b, ")");
    }
    return absl::StrCat(a, " + ", b);
  }
  bool IntegerSum(int32_t red) const {
    const std::string t = AccumulatorType(red);
    return t == "int" || t == "long long";
  }

  // The prelude's kf_max / kf_min for reduction `red`'s compute type.
  void NeedMinMax(int32_t red) { (CT(red) == "long long" ? needs_.minmax64 : needs_.minmax) = true; }

  std::string Identity(OpKind k, int32_t id) const {
    const std::string t = CT(id);
    if (k == OpKind::kReduceMax || k == OpKind::kReduceMin) {
      const bool max = k == OpKind::kReduceMax;
      if (t == "float") return max ? "__int_as_float(0xff800000)" : "__int_as_float(0x7f800000)";
      if (t == "double") {
        return max ? "__longlong_as_double(0xfff0000000000000LL)"
                   : "__longlong_as_double(0x7ff0000000000000LL)";
      }
      if (t == "long long") return max ? "(-9223372036854775807LL - 1)" : "9223372036854775807LL";
      return max ? "(-2147483647 - 1)" : "2147483647";
    }
    return absl::StrCat("(", t, ")0");
  }

  // Per-row element-wise nodes of `level`, in kernel scope.
  absl::Status RowValues(int level, std::string* s) {
    for (int32_t id = 0; id < static_cast<int32_t>(c_.nodes.size()); ++id) {
      const Node& n = c_.nodes[id];
      if (r_.cls[id] != Class::kRow || IsInput(id) || IsReduction(n.kind) || r_.level[id] != level) {
        continue;
      }
      std::vector<std::string> args;
      for (int32_t a : n.args) {
        if (IsConst(a)) {
          KFUSE_ASSIGN_OR_RETURN(std::string lit, EmitOpExpr(c_, a, {}, p_.numerics, &needs_));
          args.push_back(lit);
        } else {
          args.push_back(absl::StrCat("r", a));
        }
      }
      std::string e;
      if (n.kind == OpKind::kReshape) {
        e = args[0];  // A trailing unit dim added or dropped: the same value.
      } else if (n.kind == OpKind::kRsqrt && CT(id) == "float" && p_.numerics == Numerics::kFast) {
        // Once a row, so correctly rounded rather than rsqrtf's 2 ulp,
        // which every element of the row would carry: a norm's error then
        // stays within eager's (eager numerics keep rsqrtf, as PyTorch).
        // Inline, unlike a division's or a double's slow path, whose call
        // made register-resident rows spill.
        e = absl::StrCat("__frsqrt_rn(", args[0], ")");
      } else {
        KFUSE_ASSIGN_OR_RETURN(e, EmitOpExpr(c_, id, args, p_.numerics, &needs_));
      }
      absl::StrAppend(s, "  const ", CT(id), " r", id, " = ", e, ";\n");
    }
    return absl::OkStatus();
  }

  // One pass for a row's max M = max(t) and S = sum(exp(t - M)): each thread
  // keeps a running max and per-lane sums scaled to it (rescaled when a
  // vector raises the max), as FlashAttention's online softmax. It gives
  // the two passes' values exactly where they are special: a NaN or +inf
  // makes S NaN (M NaN or +inf); -inf terms add nothing, and a row of -inf
  // only (M = -inf) gets S = NaN, as exp(-inf - -inf) gives the two passes.
  absl::Status OnlinePass(size_t ph, int32_t exp_node, std::string* funcs, std::string* s) {
    const int32_t m = Own(ph)[0], sum = Own(ph + 1)[0];
    const int32_t t = c_.nodes[m].args[0];
    const std::vector<int32_t> targets = {t};
    Closure cl = Close(targets);
    const std::string name = absl::StrCat("kf_phase", ph + 1);
    KFUSE_ASSIGN_OR_RETURN(std::string f, PhaseFunction(name, targets, cl));
    absl::StrAppend(funcs, f);
    if (!online_prelude_) {  // The chain's exp, in its numerics, for the merges.
      KFUSE_ASSIGN_OR_RETURN(std::string e, EmitOpExpr(c_, exp_node, {"x"}, p_.numerics, &needs_));
      absl::StrAppend(funcs, "__device__ __forceinline__ float kf_oexp(const float x) { return ", e,
                      "; }\n", kOnlineTemplate);
      online_prelude_ = true;
    }
    needs_.minmax = true;
    const int lanes = p_.vec;
    // An f32 sum of more than 64 terms a lane is compensated: a
    // near-uniform row's comparable terms otherwise round the same way at
    // every step (H200, run171: 13-31 units of 2^-24 at 98-1571 terms a
    // lane, 2.6 at 12-49 terms, where compensation costs up to 13%). The
    // carry is rescaled with the sum.
    const int64_t terms = p_.resident ? p_.items
                          : r_.width.is_static()
                              ? (r_.width.size + int64_t{p_.threads} * lanes - 1) /
                                    (int64_t{p_.threads} * lanes)
                              : std::numeric_limits<int64_t>::max();
    const bool kahan = Compensated(sum) && terms > 64;
    const std::string am = absl::StrCat("a", m), as = absl::StrCat("a", sum),
                      es = absl::StrCat("e", sum);
    absl::StrAppend(s, "  // Phases ", ph + 1, " and ", ph + 2,
                    " in one pass: the row's max and its sum of exp(x - max).\n  float ", am,
                    " = __int_as_float(0xff800000), ", as, "[", lanes, "]",
                    kahan ? absl::StrCat(", ", es, "[", lanes, "]") : "",
                    ";\n#pragma unroll\n  for (int kf_e = 0; kf_e < ", lanes, "; ++kf_e) ", as,
                    "[kf_e] = ", kahan ? absl::StrCat(es, "[kf_e] = ") : "", "0.f;\n");
    KFUSE_ASSIGN_OR_RETURN(std::string ex, EmitOpExpr(c_, exp_node, {"(kf_y[kf_e] - " + am + ")"},
                                                      p_.numerics, &needs_));
    KFUSE_ASSIGN_OR_RETURN(std::string rescale, EmitOpExpr(c_, exp_node, {"(" + am + " - kf_vm)"},
                                                           p_.numerics, &needs_));
    // Per vector: its max; when that raises the running max (or is NaN),
    // the lane sums are rescaled once; then each element adds exp(t - max)
    // (nothing while the max is -inf: every t so far is -inf).
    auto body = [&](int vec) {
      PassBody b;
      b.pre = absl::StrCat("      float kf_y[", vec, "];\n");
      b.inner = absl::StrCat("        ", Call(name, cl, {"kf_y[kf_e]"}), "\n");
      absl::StrAppend(&b.post, "      float kf_vm = kf_y[0];\n#pragma unroll\n",
                      "      for (int kf_e = 1; kf_e < ", vec,
                      "; ++kf_e) kf_vm = kf_max(kf_vm, kf_y[kf_e]);\n      if (!(kf_vm <= ", am,
                      ") && ", am, " == ", am, ") {\n        const float kf_k = ", rescale,
                      ";\n#pragma unroll\n        for (int kf_e = 0; kf_e < ", lanes, "; ++kf_e) ",
                      kahan ? "{ " : "", as, "[kf_e] *= kf_k;",
                      kahan ? absl::StrCat(" ", es, "[kf_e] *= kf_k; }") : "", "\n        ", am,
                      " = kf_vm;\n      }\n      if (", am,
                      " != __int_as_float(0xff800000)) {\n#pragma unroll\n",
                      "        for (int kf_e = 0; kf_e < ", vec, "; ++kf_e) ");
      if (kahan) {
        absl::StrAppend(&b.post, "{\n          const float kf_d = ", ex, " - ", es,
                        "[kf_e], kf_s = ", as, "[kf_e] + kf_d;\n          ", es,
                        "[kf_e] = (kf_s - ", as, "[kf_e]) - kf_d;\n          ", as,
                        "[kf_e] = kf_s;\n        }\n      }\n");
      } else {
        absl::StrAppend(&b.post, as, "[kf_e] += ", ex, ";\n      }\n");
      }
      return b;
    };
    pass_ = Hinted() ? pass_ + 1 : -1;
    absl::StrAppend(s, Pass(cl.inputs, body));
    absl::StrAppend(s, kahan ? absl::StrCat("  ", as, "[0] -= ", es, "[0];\n") : "",
                    "#pragma unroll\n  for (int kf_e = 1; kf_e < ", lanes, "; ++kf_e) ", as,
                    "[0] += ", as, "[kf_e]", kahan ? absl::StrCat(" - ", es, "[kf_e]") : "",
                    ";\n");
    std::string bm = "(float*)0", bs = "(float*)0";
    if (p_.threads > 32) {
      const int slots = p_.rows_per_block * (p_.threads / 32);
      absl::StrAppend(s, "  __shared__ float kf_buf", m, "[", slots, "], kf_buf", sum, "[", slots,
                      "];\n");
      bm = absl::StrCat("kf_buf", m);
      bs = absl::StrCat("kf_buf", sum);
    }
    absl::StrAppend(s, "  kf_team_reduce_ms<", p_.threads, ">(a", m, ", a", sum, "[0], ", bm,
                    ", ", bs, ");\n  const float r", m, " = a", m, ";\n", TwinValues(ph));
    KFUSE_RETURN_IF_ERROR(RowAndPickValues(static_cast<int>(ph) + 1, funcs, s));
    absl::StrAppend(s, "  const float r", sum, " = r", m,
                    " == __int_as_float(0xff800000) ? __int_as_float(0x7fffffff) : a", sum,
                    "[0];\n", TwinValues(ph + 1));
    return RowAndPickValues(static_cast<int>(ph) + 2, funcs, s);
  }

  // Row kf_r's coordinates and the element offset kf_b<id> of each
  // per-element input's row (of the staged ones only: `staged`).
  std::string RowBases(bool staged) const {
    std::string s;
    const int k = static_cast<int>(r_.row_shape.size());
    if (k > 1) {
      absl::StrAppend(&s, "  long long kf_t = kf_valid ? kf_r : 0;\n");
      for (int d = k - 2; d >= 1; --d) {
        absl::StrAppend(&s, "  const long long kf_c", d, " = kf_t % ", DimCode(r_.row_shape[d]),
                        ";\n  kf_t /= ", DimCode(r_.row_shape[d]), ";\n");
      }
      absl::StrAppend(&s, "  const long long kf_c0 = kf_t;\n");
    }
    for (int32_t id = 0; id < static_cast<int32_t>(c_.nodes.size()); ++id) {
      if (!IsInput(id) || r_.cls[id] != Class::kElement || (staged && !Staged(id))) continue;
      absl::StrAppend(&s, "  const long long kf_b", id, " = ", Base(id), ";\n");
    }
    return s;
  }

  // Bulk-staged rows: a block of code issuing the copies of `row`'s staged
  // inputs into buffer `buf` (one thread runs it).
  std::string Fetch(const std::string& row, const std::string& buf) const {
    const int bytes = DTypeBytes(StorageDType(c_.nodes[p_.held_inputs[0]]));
    std::string s = absl::StrCat("{\n  const long long kf_r = ", row,
                                 ";\n  const bool kf_valid = true;\n", RowBases(true));
    if (p_.peel) {
      absl::StrAppend(&s, "  const long long kf_h = ", PeelHead(), ";\n  const long long kf_n = (kf_W - kf_h) / ", p_.vec,
                      " * ", p_.vec, ";\n");
    } else {
      absl::StrAppend(&s, "  const long long kf_h = 0, kf_n = kf_W;\n");
    }
    // A window input's row from the 16-byte unit holding its first element
    // (kf_q<id> elements before it), in whole units.
    std::vector<std::string> lengths;
    for (int32_t id : p_.held_inputs) {
      if (!Windowed(id)) {
        lengths.push_back(absl::StrCat("kf_n * ", bytes));
        continue;
      }
      absl::StrAppend(&s, "  const long long kf_q", id, " = ", Shift(id, "kf_h"), ";\n");
      lengths.push_back(absl::StrCat("((kf_n + kf_q", id, ") * ", bytes, " + 15) / 16 * 16"));
    }
    absl::StrAppend(&s, "  kf_bar_expect(&kf_bar[", buf, "], static_cast<unsigned>(",
                    absl::StrJoin(lengths, " + "), "));\n");
    for (size_t i = 0; i < p_.held_inputs.size(); ++i) {
      const int32_t id = p_.held_inputs[i];
      absl::StrAppend(&s, "  kf_bulk_load(kf_S", id, " + ", buf, " * ", p_.stage_stride, "LL, in",
                      c_.nodes[id].input_index, " + kf_b", id, " + kf_h",
                      Windowed(id) ? absl::StrCat(" - kf_q", id) : "", ", ", lengths[i],
                      ", &kf_bar[", buf, "]);\n");
    }
    absl::StrAppend(&s, "  }\n");
    return s;
  }

  // The elements between the 16-byte unit holding column `col` of window
  // input `id`'s row and the column.
  std::string Shift(int32_t id, const std::string& col) const {
    return absl::StrCat("static_cast<long long>(reinterpret_cast<unsigned long long>(in",
                        c_.nodes[id].input_index, " + kf_b", id, " + ", col, ") & 15) / ",
                        DTypeBytes(StorageDType(c_.nodes[id])));
  }

  // Bulk-staged rows: the buffers and their barriers, the first `stages`
  // rows' copies, then the loop over the block's rows (blockIdx.x, then
  // every gridDim.x-th; with dyn, those it takes from the counter), each
  // waiting for its buffer.
  std::string BulkLoopHead() const {
    std::string s = absl::StrCat("  extern __shared__ __align__(128) unsigned char kf_smem[];\n",
                                 "  __shared__ __align__(8) unsigned long long kf_bar[", p_.stages,
                                 "];\n");
    const int bytes = DTypeBytes(StorageDType(c_.nodes[p_.held_inputs[0]]));
    for (size_t i = 0; i < p_.held_inputs.size(); ++i) {
      const int32_t id = p_.held_inputs[i];
      absl::StrAppend(&s, "  ", Storage(id), "* const kf_S", id, " = reinterpret_cast<", Storage(id),
                      "*>(kf_smem + ", static_cast<int64_t>(i) * p_.stages * p_.stage_stride * bytes,
                      ");\n");
    }
    absl::StrAppend(&s, "  if (threadIdx.x == 0) {\n    for (int kf_i = 0; kf_i < ", p_.stages,
                    "; ++kf_i) kf_bar_init(&kf_bar[kf_i]);\n    kf_bar_fence();\n  }\n",
                    "  __syncthreads();\n");
    if (p_.dyn) {
      // Rows from the counter: thread 0 takes one for each buffer it fills
      // and posts it in kf_rows (a slot more than there are buffers: the
      // slot a take fills was last read an iteration before, behind a
      // barrier thread 0 has passed, and is read after the next one). A
      // block stops at the first row past the last, so it takes at most
      // stages + 1 past it (the launch's precondition keeps them in 32 bits).
      const int slots = p_.stages + 1;
      absl::StrAppend(&s, "  __shared__ unsigned kf_rows[", slots,
                      "];\n  if (threadIdx.x == 0) {\n    for (int kf_i = 0; kf_i < ", p_.stages,
                      "; ++kf_i) {\n      const unsigned kf_got = atomicAdd(kf_next_row, 1u);\n",
                      "      kf_rows[kf_i] = kf_got;\n      if (kf_got < kf_R) ", Fetch("kf_got", "kf_i"),
                      "    }\n  }\n  __syncthreads();\n", "  for (long long kf_it = 0;; ++kf_it) {\n",
                      "  const long long kf_r = kf_rows[kf_it % ", slots, "];\n",
                      "  if (kf_r >= kf_R) break;\n",
                      "  const unsigned kf_take = threadIdx.x == 0 ? atomicAdd(kf_next_row, 1u) : 0u;\n");
    } else {
      absl::StrAppend(&s, "  if (threadIdx.x == 0) {\n    for (int kf_i = 0; kf_i < ", p_.stages,
                      "; ++kf_i) {\n      if (blockIdx.x + (long long)kf_i * gridDim.x < kf_R) ",
                      Fetch("blockIdx.x + (long long)kf_i * gridDim.x", "kf_i"), "    }\n  }\n",
                      "  for (long long kf_it = 0;; ++kf_it) {\n",
                      "  const long long kf_r = (long long)blockIdx.x + kf_it * gridDim.x;\n",
                      "  if (kf_r >= kf_R) break;\n");
    }
    absl::StrAppend(&s, "  const bool kf_valid = true;\n",
                    "  const int kf_sb = static_cast<int>(kf_it % ", p_.stages, ");\n");
    for (int32_t id : p_.held_inputs) {
      absl::StrAppend(&s, "  const ", Storage(id), "* const kf_s", id, " = kf_S", id,
                      " + kf_sb * ", p_.stage_stride, "LL;\n");
    }
    return s;
  }

  // Bulk-staged rows, once the row's offsets are known: a peeled row's
  // columns around its vectors (not in the buffer), one a thread, loaded
  // before the wait so that no pass stalls on them; then the wait for the
  // row's buffer.
  std::string BulkRowStart() {
    std::string s;
    for (int32_t id : p_.held_inputs) {
      if (Windowed(id)) {
        absl::StrAppend(&s, "  const long long kf_sh", id, " = ",
                        Shift(id, p_.peel ? absl::StrCat("(", PeelHead(), ")") : "0"), ";\n");
      }
    }
    if (p_.peel) {
      const int v = p_.vec;
      std::string loads;
      // Held in the storage type, converted where a pass uses it: the load's
      // latency is hidden behind the pass's vectors.
      for (int32_t id : p_.held_inputs) {
        absl::StrAppend(&s, "  ", Storage(id), " kf_edge", id, " = {};\n");
        absl::StrAppend(&loads, "      kf_edge", id, " = in", c_.nodes[id].input_index, "[kf_b",
                        id, " + kf_c];\n");
      }
      absl::StrAppend(&s, "  {\n    const long long kf_h = ", PeelHead(),
                      ";\n    const long long kf_nv = (kf_W - kf_h) / ", v,
                      ";\n    if (kf_lane < kf_W - kf_nv * ", v,
                      ") {\n      const long long kf_c = kf_lane < kf_h ? kf_lane : kf_lane + kf_nv * ",
                      v, ";\n", loads, "    }\n  }\n");
    }
    absl::StrAppend(&s, "  kf_bar_wait(&kf_bar[kf_sb], static_cast<unsigned>(kf_it / ", p_.stages,
                    ") & 1u);\n");
    return s;
  }

  // Bulk-staged rows of one f32 input: a pass's float value that a later
  // pass needs (softmax's exp(x - max), summed, then divided) is written
  // over the row's buffer, in the slot of what it was computed from, where
  // no later pass reads that any more (softmax; not log_softmax, whose
  // outputs read x again). The later pass reads it instead of computing it
  // again: one exp an element, and three passes over shared memory instead
  // of an online pass and an output pass that both exp (the H200's run83:
  // 4-5% off the 50257-wide f32 softmax). Keeps at most one value a pass.
  void StageKeeps(const std::vector<std::vector<int32_t>>& pass_targets,
                  std::vector<std::vector<int32_t>>* keep, std::set<int32_t>* kept) {
    // A window input's buffer is shifted off the vectors' alignment.
    if (p_.held_inputs.size() != 1 || Storage(p_.held_inputs[0]) != "float" ||
        Windowed(p_.held_inputs[0])) {
      return;
    }
    int32_t occupant = p_.held_inputs[0];
    for (size_t a = 0; a + 1 < pass_targets.size(); ++a) {
      for (int32_t t : pass_targets[a]) {
        if (IsInput(t) || CT(t) != "float") continue;
        std::set<int32_t> with = *kept;
        with.insert(t);
        bool needed = false, legal = true;
        for (size_t b = a + 1; b < pass_targets.size(); ++b) {
          const Closure before = Close(pass_targets[b], *kept), after = Close(pass_targets[b], with);
          needed |= std::binary_search(before.compute.begin(), before.compute.end(), t);
          legal &= !std::binary_search(after.inputs.begin(), after.inputs.end(), occupant) &&
                   !std::binary_search(after.kept.begin(), after.kept.end(), occupant);
        }
        if (!needed || !legal) continue;
        (*keep)[a].push_back(t);
        kept->insert(t);
        stage_kept_.insert(t);
        occupant = t;
        break;
      }
    }
  }

  // A kept value's vector over its slot in the row's buffer.
  std::string StageStore(int32_t t) const {
    const std::string vt = absl::StrCat("kf_vec<", CT(t), ", ", p_.vec, ">");
    return absl::StrCat("      {\n        ", vt, " kf_k;\n#pragma unroll\n",
                        "        for (int kf_e = 0; kf_e < ", p_.vec, "; ++kf_e) kf_k.v[kf_e] = h", t,
                        "[kf_e];\n        *reinterpret_cast<", vt, "*>(const_cast<", CT(t), "*>(kf_s",
                        p_.held_inputs[0], ") + kf_so + kf_c) = kf_k;\n      }\n");
  }

  absl::Status Kernel(std::string* funcs, std::string* s) {
    const int k = static_cast<int>(r_.row_shape.size());
    const int block = p_.threads * p_.rows_per_block;
    std::vector<std::string> params;
    for (int32_t id = 0; id < static_cast<int32_t>(c_.nodes.size()); ++id) {
      if (!IsInput(id)) continue;
      params.push_back(absl::StrCat("const ", Storage(id), "* __restrict__ in",
                                    c_.nodes[id].input_index));
      // A kernel of a plan takes every chain input, those it does not read
      // too (a loss's last kernel, reading stored row results in fp64).
      const DType t = StorageDType(c_.nodes[id]);
      needs_.bf16 = needs_.bf16 || (!Wide(id) && t == DType::kBF16);
      needs_.half = needs_.half || (!Wide(id) && t == DType::kF16);
    }
    for (size_t j = 0; j < c_.outputs.size(); ++j) {
      params.push_back(absl::StrCat(OutputStorage(c_.nodes[c_.outputs[j]].type.dtype, p_.numerics),
                                    "* __restrict__ out", j));
    }
    for (int32_t sym : p_.symbols) params.push_back(absl::StrCat("const long long s", sym));
    if (p_.dyn) params.push_back("unsigned int* __restrict__ kf_next_row");
    if (p_.slices > 1) {
      params.push_back("unsigned char* __restrict__ kf_ws");
      params.push_back("unsigned int* __restrict__ kf_cnt");
    }
    std::vector<std::string> rows_f;
    for (int d = 0; d + 1 < k; ++d) rows_f.push_back(DimCode(r_.row_shape[d]));
    const std::string cluster =
        p_.split > 1 ? absl::StrCat("__cluster_dims__(", p_.split, ", 1, 1) ") : "";
    const std::string row = p_.split > 1
                                ? absl::StrCat("(long long)blockIdx.x / ", p_.split)
                                : absl::StrCat("(long long)blockIdx.x * ", p_.rows_per_block,
                                               " + kf_team");
    absl::StrAppend(s, "extern \"C\" __global__ void ", cluster, "__launch_bounds__(", block,
                    ") ", kEntryPlaceholder, "(", absl::StrJoin(params, ", "), ") {\n",
                    "  const long long kf_W = ", DimCode(r_.width), ";\n",
                    "  const long long kf_R = ", rows_f.empty() ? "1LL" : absl::StrJoin(rows_f, " * "),
                    ";\n  const int kf_team = threadIdx.x / ", p_.threads,
                    ";\n  const int kf_lane = threadIdx.x % ", p_.threads, ";\n");
    if (p_.slices > 1) {  // This block's columns of the row: whole vectors.
      // The launch's slices (gridDim.y): the variant's, fewer where rows
      // are many (EmitRow).
      absl::StrAppend(s, "  const long long kf_span = ((kf_W / ", p_.vec, " + gridDim.y - 1) / gridDim.y) * ",
                      p_.vec, ";\n  const long long kf_lo = (long long)blockIdx.y * kf_span;\n",
                      "  const long long kf_hi = min(kf_W, kf_lo + kf_span);\n");
    }
    if (p_.bulk) {
      absl::StrAppend(s, BulkLoopHead());
    } else {
      absl::StrAppend(s, "  const long long kf_r = ", row,
                      ";\n  const bool kf_valid = kf_r < kf_R;\n",
                      Hinted() ? "  const unsigned long long kf_keep = kf_policy(true), kf_stream = "
                                 "kf_policy(false);\n"
                      : p_.policy ? "  const unsigned long long kf_keep = kf_policy(true);\n"
                                  : "");
    }
    absl::StrAppend(s, RowBases(false));
    for (int32_t id = 0; id < static_cast<int32_t>(c_.nodes.size()); ++id) {
      // Per-row inputs (per-element ones are read where a pass needs them).
      if (!IsInput(id) || r_.cls[id] == Class::kNone || r_.cls[id] == Class::kElement) continue;
      const Node& n = c_.nodes[id];
      absl::StrAppend(s, "  const ", CT(id), " r", id, " = kf_valid ? ",
                      Load(absl::StrCat("in", n.input_index, "[", Base(id), "]"), id),
                      " : (", CT(id), ")0;\n");
    }
    if (p_.bulk) absl::StrAppend(s, BulkRowStart());
    if (p_.stage_bytes > 0 && !p_.bulk) {
      absl::StrAppend(s, "  extern __shared__ __align__(16) unsigned char kf_smem[];\n");
      int64_t offset = 0;
      for (int32_t id : p_.held_inputs) {
        absl::StrAppend(s, "  ", Storage(id), "* const kf_s", id, " = reinterpret_cast<",
                        Storage(id), "*>(kf_smem + ", offset, ") + (long long)kf_team * ",
                        p_.stage_stride, ";\n");
        offset += int64_t{p_.rows_per_block} * p_.stage_stride *
                  DTypeBytes(StorageDType(c_.nodes[id]));
      }
    }
    if (p_.resident) {
      if (p_.peel || p_.split > 1) absl::StrAppend(s, ResidentIndices());
      for (int32_t id : p_.held_inputs) {
        absl::StrAppend(s, "  ", Raw() ? Storage(id) : CT(id), " x", id, "[", Slots(), "];\n");
      }
      // The tail's element (vec 1 of a vectorized row) is the last slot.
      absl::StrAppend(s, ResidentLoop([&](int vec, const std::string& indent) {
        const std::string first = vec == p_.vec ? absl::StrCat("kf_i * ", p_.vec)
                                                : absl::StrCat(p_.items * p_.vec);
        std::string l;
        for (int32_t id : p_.held_inputs) {
          absl::StrAppend(&l, LoadVec(id, absl::StrCat("x", id), first, indent, vec, Src::kGlobal,
                                      Raw()));
        }
        return l;
      }));
    }
    KFUSE_RETURN_IF_ERROR(RowAndPickValues(0, funcs, s));
    // Each pass's per-element targets: the accumulated reductions' operands,
    // then the full-row outputs.
    std::vector<std::vector<int32_t>> pass_targets;
    for (size_t ph = 0; ph < r_.phases.size(); ++ph) {
      std::vector<int32_t> targets;
      for (int32_t red : Own(ph)) {
        int32_t a = c_.nodes[red].args[0];
        if (r_.cls[a] != Class::kElement) {
          return absl::UnimplementedError("a reduction of per-row values is not generated yet");
        }
        if (std::find(targets.begin(), targets.end(), a) == targets.end()) targets.push_back(a);
      }
      pass_targets.push_back(std::move(targets));
    }
    std::vector<int32_t> out_targets;
    for (int32_t o : c_.outputs) {
      if (r_.cls[o] == Class::kElement &&
          std::find(out_targets.begin(), out_targets.end(), o) == out_targets.end()) {
        out_targets.push_back(o);
      }
    }
    pass_targets.push_back(out_targets);
    // Resident rows keep in registers a pass's value that a later pass
    // needs (softmax's exp(x - max), summed, then divided), instead of
    // computing it again.
    // Split rows do not: they are split to hold more rows in flight, and
    // registers are what limits that.
    std::set<int32_t> kept;
    std::vector<std::vector<int32_t>> keep(pass_targets.size());
    if (p_.bulk) StageKeeps(pass_targets, &keep, &kept);
    if (p_.resident && p_.split == 1) {
      for (size_t a = 0; a + 1 < pass_targets.size(); ++a) {
        for (int32_t t : pass_targets[a]) {
          for (size_t b = a + 1; b < pass_targets.size(); ++b) {
            const Closure later = Close(pass_targets[b], kept);
            if (std::binary_search(later.compute.begin(), later.compute.end(), t)) {
              keep[a].push_back(t);
              kept.insert(t);
              break;
            }
          }
        }
      }
    }
    // The last pass reading each per-element input, for the L2 policies
    // (looped rows keep nothing in registers, so every pass loads what it
    // reads): the passes as the loop below writes them.
    for (size_t ph = 0, pass = 0; ph <= r_.phases.size(); ++ph, ++pass) {
      std::vector<int32_t> targets =
          ph < r_.phases.size() ? pass_targets[ph] : out_targets;
      if (ph < r_.phases.size() && OnlinePair(ph) >= 0) {
        targets = {c_.nodes[Own(ph)[0]].args[0]};
        ++ph;
      }
      if (targets.empty()) continue;
      for (int32_t id : Close(targets).inputs) last_read_[id] = static_cast<int>(pass);
    }
    std::set<int32_t> available;  // Kept by the passes emitted so far.
    for (size_t ph = 0; ph < r_.phases.size(); ++ph) {
      if (const int32_t e = OnlinePair(ph); e >= 0) {
        KFUSE_RETURN_IF_ERROR(OnlinePass(ph, e, funcs, s));
        ++ph;
        continue;
      }
      const std::vector<int32_t>& targets = pass_targets[ph];
      if (Own(ph).empty()) {  // Picks (and their twins) alone: no pass.
        pass_ = Hinted() ? pass_ + 1 : -1;
        absl::StrAppend(s, TwinValues(ph));
        KFUSE_RETURN_IF_ERROR(RowAndPickValues(static_cast<int>(ph) + 1, funcs, s));
        continue;
      }
      Closure cl = Close(targets, available);
      const std::string name = absl::StrCat("kf_phase", ph + 1);
      KFUSE_ASSIGN_OR_RETURN(std::string f, PhaseFunction(name, targets, cl));
      absl::StrAppend(funcs, f);
      for (int32_t t : keep[ph]) {
        absl::StrAppend(s, "  ", CT(t), p_.bulk ? absl::StrCat(" kf_he", t, " = 0") :
                        absl::StrCat(" h", t, "[", Slots(), "]"), ";\n");
      }
      absl::StrAppend(s, "  // Phase ", ph + 1, ".\n");
      // A thread keeps one accumulator per vector lane (shorter dependency
      // chains), combined after the pass: on looped rows, and for max/min
      // on resident rows (a NaN-checking select chain); not for resident
      // sums (the H200 run7 lost 4-7% on LayerNorm bf16 with them) nor in
      // resident blocks of 512 threads and more (NVRTC spilled).
      const std::vector<int32_t> own = Own(ph);
      bool minmax = false;
      for (int32_t red : own) {
        minmax |= c_.nodes[red].kind == OpKind::kReduceMax || c_.nodes[red].kind == OpKind::kReduceMin;
      }
      const bool roomy = !p_.resident || (minmax && p_.threads * p_.rows_per_block < 512);
      const int lanes = p_.numerics == Numerics::kFast && roomy ? p_.vec : 1;
      const std::string lane = lanes > 1 ? "[kf_e]" : "";
      for (int32_t red : own) {
        const std::string dims = lanes > 1 ? absl::StrCat("[", lanes, "]") : "";
        const std::string id = Identity(c_.nodes[red].kind, red);
        absl::StrAppend(s, "  ", AccumulatorType(red), " a", red, dims, lanes > 1 ? ";\n" : "",
                        lanes > 1 ? absl::StrCat("#pragma unroll\n  for (int kf_e = 0; kf_e < ",
                                                 lanes, "; ++kf_e) a", red, "[kf_e]")
                                  : "",
                        " = ", id, ";\n");
        if (Compensated(red)) {
          absl::StrAppend(s, "  ", CT(red), " e", red, dims, lanes > 1 ? " = {}" : " = 0", ";\n");
        }
      }
      std::string inner;
      std::vector<std::string> outs;
      for (size_t t = 0; t < targets.size(); ++t) {
        absl::StrAppend(&inner, "        ", CT(targets[t]), " kf_y", t, ";\n");
        outs.push_back(absl::StrCat("kf_y", t));
      }
      absl::StrAppend(&inner, "        ", Call(name, cl, outs), "\n");
      for (int32_t t : keep[ph]) {
        const size_t k = std::find(targets.begin(), targets.end(), t) - targets.begin();
        absl::StrAppend(&inner, "        h", t, "[KF_X] = kf_y", k, ";\n");
      }
      for (int32_t red : own) {
        const OpKind kind = c_.nodes[red].kind;
        const size_t t = std::find(targets.begin(), targets.end(), c_.nodes[red].args[0]) -
                         targets.begin();
        const std::string a = absl::StrCat("a", red, lane), e = absl::StrCat("e", red, lane);
        if (kind == OpKind::kReduceMax || kind == OpKind::kReduceMin) {
          NeedMinMax(red);
          absl::StrAppend(&inner, "        ", a, " = ",
                          kind == OpKind::kReduceMax ? "kf_max" : "kf_min", "(", a, ", kf_y", t,
                          ");\n");
        } else if (Compensated(red)) {
          // Kahan: e<red> carries what the last addition lost, so a thread's
          // long serial sum stays within a few ulps of the exact one.
          absl::StrAppend(&inner, "        { const ", CT(red), " kf_d = kf_y", t, " - ", e,
                          "; const ", CT(red), " kf_s = ", a, " + kf_d; ", e, " = (kf_s - ", a,
                          ") - kf_d; ", a, " = kf_s; }\n");
        } else {
          const std::string y = absl::StrCat("kf_y", t);
          absl::StrAppend(&inner, "        ", a, IntegerSum(red) ? absl::StrCat(" = ", Sum(red, a, y))
                                                                : absl::StrCat(" += ", y), ";\n");
        }
      }
      pass_ = Hinted() ? pass_ + 1 : -1;
      kept_now_ = cl.kept;
      absl::StrAppend(s, Pass(cl.inputs, [&](int vec) {
        PassBody b{"", inner, ""};
        if (p_.bulk) {
          // The kept value goes over its slot in the row's buffer (the
          // columns around the vectors: a register).
          for (int32_t t : keep[ph]) {
            b.pre = absl::StrCat("      ", CT(t), " h", t, "[", vec, "];\n");
            b.post = vec == p_.vec ? StageStore(t) : absl::StrCat("      kf_he", t, " = h", t, "[0];\n");
          }
        }
        return b;
      }));
      kept_now_.clear();
      for (int32_t red : own) {
        const OpKind kind = c_.nodes[red].kind;
        if (Compensated(red) && MeetType(red) == "double") {
          // Each lane's sum and what it lost, taken in double: rounded to
          // float first, a sum that cancels (terms of +-50 totalling 100)
          // kept each lane's rounding of its partial, 1e-2 off over 4M
          // terms where eager's cascade is 1e-5 (H100, run231).
          absl::StrAppend(s, "  double w", red, " = 0.0;\n");
          absl::StrAppend(s, lanes > 1 ? absl::StrCat("#pragma unroll\n  for (int kf_e = 0; kf_e < ", lanes,
                                                      "; ++kf_e) ")
                                       : "  ",
                          "w", red, " += (double)a", red, lane, " - (double)e", red, lane, ";\n");
          continue;
        }
        if (lanes == 1) {
          if (Compensated(red)) absl::StrAppend(s, "  a", red, " -= e", red, ";\n");
          continue;
        }
        // The lanes into lane 0 (the scalar a<red> below).
        const std::string combine =
            kind == OpKind::kReduceMax   ? absl::StrCat("kf_max(a", red, "[0], a", red, "[kf_e])")
            : kind == OpKind::kReduceMin ? absl::StrCat("kf_min(a", red, "[0], a", red, "[kf_e])")
                                         : Sum(red, absl::StrCat("a", red, "[0]"), absl::StrCat("a", red, "[kf_e]"));
        if (Compensated(red)) {
          absl::StrAppend(s, "#pragma unroll\n  for (int kf_e = 0; kf_e < ", lanes,
                          "; ++kf_e) a", red, "[kf_e] -= e", red, "[kf_e];\n");
        }
        absl::StrAppend(s, "#pragma unroll\n  for (int kf_e = 1; kf_e < ", lanes, "; ++kf_e) a",
                        red, "[0] = ", combine, ";\n");
      }
      // Each reduction's value in the type the threads' values meet in
      // (mt), then finished (a mean's division, the result's rounding).
      std::vector<std::string> meets;
      for (int32_t red : own) {
        const Node& n = c_.nodes[red];
        const char* op = n.kind == OpKind::kReduceMax   ? "kf_max_op"
                         : n.kind == OpKind::kReduceMin ? "kf_min_op"
                                                        : "kf_sum_op";
        const std::string mt = MeetType(red);
        std::string buf = absl::StrCat("(", mt, "*)0");
        if (p_.threads > 32) {
          absl::StrAppend(s, "  __shared__ ", mt, " kf_buf", red, "[",
                          p_.rows_per_block * (p_.threads / 32), "];\n");
          buf = absl::StrCat("kf_buf", red);
        }
        const std::string own_value = Compensated(red) && mt == "double" ? absl::StrCat("w", red)
                                      : absl::StrCat(mt == CT(red) ? "" : "(double)", "a", red,
                                                     lanes > 1 ? "[0]" : "");
        std::string v = absl::StrCat("kf_team_reduce<", p_.threads, ">(", own_value, ", ", buf, ", ", op, "())");
        if (p_.split > 1) {  // The cluster's blocks' partial values.
          absl::StrAppend(s, "  __shared__ ", mt, " kf_cs", red, ";\n");
          v = absl::StrCat("kf_cluster_reduce<", p_.split, ">(", v, ", &kf_cs", red, ", ", op,
                           "())");
        }
        if (p_.slices > 1) {  // This block's value; the row's last block combines them.
          absl::StrAppend(s, "  const ", mt, " b", red, " = ", v, ";\n");
          v = absl::StrCat("kf_slices_reduce<", p_.threads, ">(", SlicePart(red), ", (int)gridDim.y, (", mt,
                           ")", Identity(n.kind, red), ", ", buf, ", ", op, "())");
        }
        meets.push_back(std::move(v));
      }
      if (p_.slices > 1) absl::StrAppend(s, SlicesMeet(own));
      for (size_t j = 0; j < own.size(); ++j) {
        const int32_t red = own[j];
        const Node& n = c_.nodes[red];
        const std::string mt = MeetType(red);
        std::string v = meets[j];
        if (n.kind == OpKind::kReduceMean) v = absl::StrCat(v, " / (", mt, ")kf_W");
        if (mt != CT(red)) v = absl::StrCat("(", CT(red), ")(", v, ")");
        if (p_.numerics == Numerics::kEager && n.type.dtype == DType::kBF16) {
          needs_.bf16 = true;
          v = absl::StrCat("kf_rbf(", v, ")");
        } else if (p_.numerics == Numerics::kEager && n.type.dtype == DType::kF16) {
          needs_.half = true;
          v = absl::StrCat("kf_rh(", v, ")");
        }
        absl::StrAppend(s, "  const ", CT(red), " r", red, " = ", v, ";\n");
      }
      absl::StrAppend(s, TwinValues(ph));
      KFUSE_RETURN_IF_ERROR(RowAndPickValues(static_cast<int>(ph) + 1, funcs, s));
      available.insert(keep[ph].begin(), keep[ph].end());
    }
    // The cluster's last reads of each other's shared memory are done.
    if (p_.split > 1) absl::StrAppend(s, "  kf_cluster_arrive();\n");
    // Full-row outputs.
    const std::vector<int32_t>& targets = out_targets;
    if (!targets.empty()) {
      Closure cl = Close(targets, available);
      KFUSE_ASSIGN_OR_RETURN(std::string f, PhaseFunction("kf_out", targets, cl));
      absl::StrAppend(funcs, f);
      std::vector<std::string> outs;
      std::string compute;
      for (size_t t = 0; t < targets.size(); ++t) {
        absl::StrAppend(&compute, "        ", CT(targets[t]), " kf_y", t, ";\n");
        outs.push_back(absl::StrCat("kf_y", t));
      }
      absl::StrAppend(&compute, "        ", Call("kf_out", cl, outs), "\n");
      auto body = [&](int vec) {
        PassBody b{"", compute, ""};
        for (size_t j = 0; j < c_.outputs.size(); ++j) {
          const int32_t o = c_.outputs[j];
          if (r_.cls[o] != Class::kElement) continue;
          const size_t t = std::find(targets.begin(), targets.end(), o) - targets.begin();
          const std::string os = OutputStorage(c_.nodes[o].type.dtype, p_.numerics);
          const std::string val =
              StoreExpr(absl::StrCat("kf_y", t), c_.nodes[o].type.dtype, p_.numerics, &needs_);
          if (vec == 1) {
            absl::StrAppend(&b.inner, "        if (kf_valid) ",
                            Hinted() ? absl::StrCat("kf_sth<", os, ">(out", j,
                                                    " + kf_r * kf_W + kf_c, ", val, ", kf_stream);\n")
                                     : absl::StrCat("out", j, "[kf_r * kf_W + kf_c] = ", val, ";\n"));
          } else {
            const std::string vt = absl::StrCat("kf_vec<", os, ", ", vec, ">");
            absl::StrAppend(&b.pre, "      ", vt, " kf_o", j, ";\n");
            absl::StrAppend(&b.inner, "        kf_o", j, ".v[kf_e] = ", val, ";\n");
            absl::StrAppend(&b.post, "      if (kf_valid) ",
                            Hinted() ? absl::StrCat("kf_sth(reinterpret_cast<", vt, "*>(out", j,
                                                    " + kf_r * kf_W + kf_c), kf_o", j, ", kf_stream);\n")
                                     : p_.bulk
                                         ? absl::StrCat("kf_stv(reinterpret_cast<", vt, "*>(out", j,
                                                        " + kf_r * kf_W + kf_c), kf_o", j, ");\n")
                                         : absl::StrCat("*reinterpret_cast<", vt, "*>(out", j,
                                                        " + kf_r * kf_W + kf_c) = kf_o", j, ";\n"));
          }
        }
        return b;
      };
      pass_ = Hinted() ? pass_ + 1 : -1;
      kept_now_ = cl.kept;
      absl::StrAppend(s, "  // Full-row outputs.\n", Pass(cl.inputs, body));
      kept_now_.clear();
    }
    for (size_t j = 0; j < c_.outputs.size(); ++j) {
      const int32_t o = c_.outputs[j];
      if (r_.cls[o] != Class::kRow) continue;
      absl::StrAppend(s, "  if (kf_valid && kf_lane == 0", p_.split > 1 ? " && kf_q == 0" : "",
                      ") out", j, "[kf_r] = ",
                      StoreExpr(absl::StrCat("r", o), c_.nodes[o].type.dtype, p_.numerics, &needs_),
                      ";\n");
    }
    // No block leaves while another may still read its shared memory.
    if (p_.split > 1) absl::StrAppend(s, "  kf_cluster_wait();\n");
    if (p_.bulk) {
      // Every thread is done with the buffer: it takes the row `stages`
      // rows on. Values written over it come before the copy's writes.
      if (p_.dyn) {  // The row taken at the top, posted for its buffer's turn.
        absl::StrAppend(s, "  if (threadIdx.x == 0) kf_rows[(kf_it + ", p_.stages, ") % ",
                        p_.stages + 1, "] = kf_take;\n");
      }
      if (!stage_kept_.empty()) {
        absl::StrAppend(s, "  asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n");
      }
      if (p_.dyn) {
        absl::StrAppend(s, "  __syncthreads();\n  if (threadIdx.x == 0 && kf_take < kf_R) ",
                        Fetch("kf_take", "kf_sb"), "  }\n");
      } else {
        absl::StrAppend(s, "  __syncthreads();\n  const long long kf_next = kf_r + ", p_.stages,
                        " * (long long)gridDim.x;\n  if (threadIdx.x == 0 && kf_next < kf_R) ",
                        Fetch("kf_next", "kf_sb"), "  }\n");
      }
    }
    absl::StrAppend(s, "}\n");
    return absl::OkStatus();
  }

  const Chain& c_;
  const Plan& p_;
  const RowStructure& r_;
  PreludeNeeds needs_;
  std::set<int32_t> staged_;  // resident=2: inputs a pass has staged.
  // Hinted kernels: the pass being written (0, 1, ...; -1 before the
  // first and in kernels without policies), and the last pass that reads
  // each per-element input.
  int pass_ = -1;
  std::map<int32_t, int> last_read_;
  bool online_prelude_ = false;
  // Bulk-staged rows: values kept over the buffer of their one staged input
  // (StageKeeps), and those the pass being written reads.
  std::set<int32_t> stage_kept_;
  // Per node (reductions only): Twin's and Pick's answers, found once.
  std::vector<int32_t> twin_;
  std::vector<std::pair<int32_t, int32_t>> pick_;
  std::vector<int32_t> kept_now_;
};

}  // namespace

absl::StatusOr<Source> WriteSource(const Chain& chain, const Plan& plan) {
  return Writer(chain, plan).Write();
}

int Passes(const Chain& chain, const Plan& plan) { return Writer(chain, plan).Passes(); }
int SlicedReductions(const Chain& chain, const Plan& plan) { return Writer(chain, plan).SlicedReductions(); }

}  // namespace kfuse::row_internal
