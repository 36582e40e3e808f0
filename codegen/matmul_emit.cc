// The matmul family's source writer: the tensor-core kernel (cp.async
// pipeline, ldmatrix, mma.sync, split-K), or the one-thread-per-element
// yardsticks, with the epilogue written per output element by EmitOpExpr.
#include <algorithm>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "codegen/matmul.h"
#include "codegen/matmul_plan.h"
#include "codegen/tensor_core.h"
#include "core/status.h"

namespace kfuse::matmul_internal {
namespace {

constexpr char kEntryPlaceholder[] = "KF_ENTRY";

// The matmul kernel's own building blocks, after kTensorCoreBlocks.
constexpr char kMatmulBlocks[] = R"(// Where accumulator q of a warp's fragment (mt, nt) sits in the CTA's tile.
__device__ __forceinline__ int kf_acc_at(int mt, int nt, int q, int warp_m, int warp_n, int lane) {
  return (warp_m * kf_TM + mt * 16 + (lane >> 2) + (q >> 1) * 8) * kf_BN + warp_n * kf_TN +
         nt * 8 + (lane & 3) * 2 + (q & 1);
}
// The A and B fragments of step kk (16 of K) of the stage at `sa`: ldmatrix
// for K-major tiles, ldmatrix.trans for M-major A and N-major B.
__device__ __forceinline__ void kf_frags(unsigned (&af)[kf_MT][4], unsigned (&bf)[kf_NT][2],
                                         unsigned sa, int kk, int warp_m, int warp_n, int lane) {
  const unsigned sb = sa + kf_BM * kf_BK * 2;
#pragma unroll
  for (int mt = 0; mt < kf_MT; ++mt) {
    const int mr = warp_m * kf_TM + mt * 16;
    if constexpr (kf_A_KMAJOR)
      kf_ldm4(af[mt], sa + 2 * kf_swz<kf_BK>(mr + (lane & 15), kk * 16 + ((lane >> 4) << 3)));
    else
      kf_ldm4t(af[mt], sa + 2 * kf_swz<kf_BM>(kk * 16 + (lane & 7) + ((lane >> 4) << 3),
                                            mr + (((lane >> 3) & 1) << 3)));
  }
#pragma unroll
  for (int np = 0; np < kf_NT / 2; ++np) {
    const int nc = warp_n * kf_TN + np * 16;
    unsigned r[4];
    if constexpr (kf_B_KMAJOR)
      kf_ldm4(r, sb + 2 * kf_swz<kf_BK>(nc + (lane & 7) + ((lane >> 4) << 3),
                                       kk * 16 + (((lane >> 3) & 1) << 3)));
    else
      kf_ldm4t(r, sb + 2 * kf_swz<kf_BN>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                        nc + ((lane >> 4) << 3)));
    bf[2 * np][0] = r[0];
    bf[2 * np][1] = r[1];
    bf[2 * np + 1][0] = r[2];
    bf[2 * np + 1][1] = r[3];
  }
}
)";

// The streaming schedule's loads: past K (when K is not a whole number of
// steps) they read zeros; where every step lies within K (WholeK), they carry
// no predicate.
constexpr char kStreamLoadsChecked[] = R"(__device__ __forceinline__ uint4 kf_ldg_stream(const unsigned short* p, bool ok) {
  uint4 v;
  asm("{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n"
      " mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "r"((int)ok));
  return v;
}
__device__ __forceinline__ uint4 kf_ldg_cached(const unsigned short* p, bool ok) {
  uint4 v;
  asm("{\n .reg .pred p;\n setp.ne.b32 p, %5, 0;\n mov.b32 %0, 0;\n mov.b32 %1, 0;\n"
      " mov.b32 %2, 0;\n mov.b32 %3, 0;\n"
      " @p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "r"((int)ok));
  return v;
}
)";
constexpr char kStreamLoadsWithin[] = R"(__device__ __forceinline__ uint4 kf_ldg_stream(const unsigned short* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint4 kf_ldg_cached(const unsigned short* p) {
  uint4 v;
  asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
)";
// The streaming schedule's building blocks (Plan::stream). A warp's step
// is 32 of K by 64 columns: lane (g, c) = (lane / 4, lane % 4) loads eight
// 16-byte chunks of B and, for each eight rows of A, the chunk A[row g][k0 +
// 8c, + 8). The m16n8k16 products take B's transpose as their first operand
// (16 columns by 16 of K) and A as their second (8 rows), so column pairs
// of N-major B come apart by byte permutes and nothing is transposed in
// memory. Their K order is permuted: product half s takes K k0 + 8c + 4s +
// [0, 4) of lane (g, c), the same in both operands, so A's chunk holds both
// halves' fragments.
constexpr char kStreamBlocks[] = R"(__device__ __forceinline__ unsigned kf_word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
// One step's products: w, the eight chunks of B; x, A's chunks.
__device__ __forceinline__ void kf_stream_step(float (&acc)[kf_MT][4][4], const uint4 (&w)[8],
                                               const uint4 (&x)[kf_MT]) {
#pragma unroll
  for (int s = 0; s < 2; ++s)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      unsigned a[4];
      if constexpr (kf_B_KMAJOR) {
        // Chunks 2j and 2j + 1: columns 16j + g and 16j + 8 + g, eight of K each.
        a[0] = kf_word(w[2 * j], 2 * s);
        a[1] = kf_word(w[2 * j + 1], 2 * s);
        a[2] = kf_word(w[2 * j], 2 * s + 1);
        a[3] = kf_word(w[2 * j + 1], 2 * s + 1);
      } else {
        // Chunk r: row k0 + 8c + r, columns 8g to 8g + 7; product j takes
        // columns 8g + 2j (its row g) and 8g + 2j + 1 (row g + 8).
        const unsigned r0 = kf_word(w[4 * s], j), r1 = kf_word(w[4 * s + 1], j);
        const unsigned r2 = kf_word(w[4 * s + 2], j), r3 = kf_word(w[4 * s + 3], j);
        a[0] = __byte_perm(r0, r1, 0x5410);
        a[1] = __byte_perm(r0, r1, 0x7632);
        a[2] = __byte_perm(r2, r3, 0x5410);
        a[3] = __byte_perm(r2, r3, 0x7632);
      }
#pragma unroll
      for (int mt = 0; mt < kf_MT; ++mt) {
        const unsigned b[2] = {kf_word(x[mt], 2 * s), kf_word(x[mt], 2 * s + 1)};
        kf_mma(acc[mt][j], a, b);
      }
    }
}
// Where accumulator q of product (mt, j) of lane (g, c) sits in its warp's
// 64 columns and the CTA's rows.
__device__ __forceinline__ int kf_stream_col(int j, int q, int g) {
  return kf_B_KMAJOR ? 16 * j + g + 8 * (q >> 1) : 8 * g + 2 * j + (q >> 1);
}
__device__ __forceinline__ int kf_stream_row(int mt, int q, int c) { return mt * 8 + 2 * c + (q & 1); }
)";

// Opens a loop over a thread's accumulators acc[mt][nt][q]; the body is
// indented eight spaces and closed by kEndEach.
constexpr char kEachAccumulator[] = R"(#pragma unroll
  for (int mt = 0; mt < kf_MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kf_NT; ++nt)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
)";
constexpr char kEndEach[] = "      }\n";

// A kernel that reduces rows in its epilogue (Plan::Rows()) names a lane's
// values by fragment: row (mt, h) of the warp's tile (h: the upper or lower
// eight rows of an m16n8 fragment) and column (nt, e) (e: the pair's first
// or second). Per-row values combine across the four lanes holding a row,
// then across the kf_WN warps sharing it through shared memory `xr`
// ([kf_WN][kf_BM] floats, within the stages' bytes), in warp order, so
// every lane of a row ends with the same bits. Every thread calls it.
constexpr char kRowBlocks[] = R"(__device__ __forceinline__ int kf_row(int warp_m, int lane, int mt, int h) {
  return warp_m * kf_TM + mt * 16 + (lane >> 2) + h * 8;
}
__device__ __forceinline__ int kf_col(int warp_n, int lane, int nt, int e) {
  return warp_n * kf_TN + nt * 8 + (lane & 3) * 2 + e;
}
struct kf_sum_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};
struct kf_max_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return kf_max(a, b); }
};
struct kf_min_op {
  __device__ __forceinline__ float operator()(float a, float b) const { return kf_min(a, b); }
};
template <typename Op>
__device__ __forceinline__ void kf_row_reduce(float (&v)[kf_MT][2], float* xr, int warp_m,
                                              int warp_n, int lane, Op op) {
#pragma unroll
  for (int mt = 0; mt < kf_MT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      v[mt][h] = op(v[mt][h], __shfl_xor_sync(0xffffffffu, v[mt][h], 1));
      v[mt][h] = op(v[mt][h], __shfl_xor_sync(0xffffffffu, v[mt][h], 2));
    }
  if constexpr (kf_WN > 1) {
    if ((lane & 3) == 0) {
#pragma unroll
      for (int mt = 0; mt < kf_MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) xr[warp_n * kf_BM + kf_row(warp_m, lane, mt, h)] = v[mt][h];
    }
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < kf_MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = kf_row(warp_m, lane, mt, h);
        float t = xr[r];
#pragma unroll
        for (int w = 1; w < kf_WN; ++w) t = op(t, xr[w * kf_BM + r]);
        v[mt][h] = t;
      }
    __syncthreads();
  }
}
)";

// Loops over a lane's values by fragment row (mt, h), and with `columns` by
// column (nt, e) too; the body is indented eight spaces and closed by
// kEndEach.
std::string EachValue(bool columns) {
  if (!columns) {
    return "#pragma unroll\n  for (int mt = 0; mt < kf_MT; ++mt)\n#pragma unroll\n"
           "    for (int h = 0; h < 2; ++h) {\n";
  }
  return "#pragma unroll\n  for (int mt = 0; mt < kf_MT; ++mt)\n#pragma unroll\n"
         "    for (int h = 0; h < 2; ++h)\n#pragma unroll\n"
         "      for (int nt = 0; nt < kf_NT; ++nt)\n#pragma unroll\n"
         "        for (int e = 0; e < 2; ++e) {\n";
}

class Writer {
 public:
  Writer(const Chain& chain, const Plan& plan) : c_(chain), p_(plan) {}

  // K a whole number of steps: so is every slice (kper is), each step a
  // warp of the streaming schedule takes lies within K and its loads need no
  // predicate, and no step past the warp's last is loaded. The predicates
  // and their zeroing cost the M = 16 kernel 0.5 us of 37 (run146).
  bool WholeK() const { return p_.k.is_static() && p_.k.size % 32 == 0; }

  absl::StatusOr<Source> Write() {
    std::string body;
    KFUSE_RETURN_IF_ERROR(Kernel(&body));
    std::string head = absl::StrCat(
        "// Generated by kfuse ", kMatmulGeneratorVersion, ": ", Describe(), ", numerics ",
        NumericsName(p_.numerics), ".\n");
    std::string text;
    if (Fast()) {
      text = absl::StrCat(head, CudaPrelude(needs_), Constants(), kTensorCoreBlocks,
                          p_.stream ? (WholeK() ? kStreamLoadsWithin : kStreamLoadsChecked) : "",
                          p_.stream ? kStreamBlocks : kMatmulBlocks, p_.Rows() ? kRowBlocks : "",
                          body);
    } else {
      text = absl::StrCat(head, CudaPrelude(needs_), body);
    }
    Source src;
    src.entry = absl::StrFormat("kf_mm_%012x", SourceHash(text) >> 16);
    src.text = absl::StrReplaceAll(text, {{kEntryPlaceholder, src.entry}});
    return src;
  }

 private:
  bool Fast() const { return p_.numerics == Numerics::kFast; }
  DType AB() const { return p_.a.dtype; }

  std::string Describe() const {
    std::string s = absl::StrCat(std::string(DTypeName(AB())), " [", p_.a_kmajor ? "K" : "M", "-major] @ [",
                                 p_.b_kmajor ? "K" : "N", "-major], ", p_.epilogue.size(),
                                 " epilogue op(s)");
    if (Fast() && p_.stream) {
      absl::StrAppend(&s, ", streamed B, ", p_.bm, " rows x ", p_.bn, " columns a CTA, warps ",
                      p_.wn, " along N x ", p_.wk, " along K, ", p_.stages, " steps in flight, split-K ",
                      p_.splitk, p_.cluster ? " over a cluster" : "");
    } else if (Fast()) {
      absl::StrAppend(&s, ", tile ", p_.bm, "x", p_.bn, "x", p_.bk, ", warps ", p_.wm, "x", p_.wn,
                      ", ", p_.stages, " stages, group ", p_.group, ", split-K ", p_.splitk,
                      p_.cluster ? " over a cluster" : "");
    }
    return s;
  }

  std::string Constants() const {
    if (p_.stream) {
      return absl::StrCat(
          "#define KF_AB \"", AB() == DType::kBF16 ? "bf16" : "f16", "\"\n",
          "constexpr int kf_BM = ", p_.bm, ", kf_BN = ", p_.bn, ", kf_WN = ", p_.wn,
          ", kf_WK = ", p_.wk, ", kf_STAGES = ", p_.stages, ", kf_SPLITK = ", p_.splitk, ";\n",
          "constexpr int kf_THREADS = ", 32 * p_.wn * p_.wk, ", kf_MT = kf_BM / 8, kf_PITCH = kf_BN + 1;\n",
          "constexpr bool kf_B_KMAJOR = ", p_.b_kmajor ? "true" : "false", ";\n");
    }
    const int threads = 32 * p_.wm * p_.wn;
    return absl::StrCat(
        "#define KF_AB \"", AB() == DType::kBF16 ? "bf16" : "f16", "\"\n",
        "constexpr int kf_BM = ", p_.bm, ", kf_BN = ", p_.bn, ", kf_BK = ", p_.bk,
        ", kf_WM = ", p_.wm, ", kf_WN = ", p_.wn, ", kf_STAGES = ", p_.stages,
        ", kf_GROUP = ", p_.group, ", kf_SPLITK = ", p_.splitk, ";\n",
        "constexpr int kf_THREADS = ", threads, ", kf_TM = kf_BM / kf_WM, kf_TN = kf_BN / kf_WN;\n",
        "constexpr int kf_MT = kf_TM / 16, kf_NT = kf_TN / 8, kf_KK = kf_BK / 16;\n",
        "constexpr int kf_STAGE_BYTES = (kf_BM + kf_BN) * kf_BK * 2;\n",
        "constexpr bool kf_A_KMAJOR = ", p_.a_kmajor ? "true" : "false",
        ", kf_B_KMAJOR = ", p_.b_kmajor ? "true" : "false", ";\n");
  }

  std::string Storage(DType t) const { return std::string(DTypeStorage(t)); }

  // Split K over a cluster: the tile's slices (grid.y) are one cluster,
  // so a CTA's rank in it is its slice.
  std::string ClusterDims() {
    if (!Fast() || !p_.cluster) return "";
    needs_.cluster = true;
    return "__cluster_dims__(1, kf_SPLITK, 1) ";
  }

  // The kernel's parameter list, in the launch contract's order.
  std::string Params() {
    std::vector<std::string> ps;
    for (int32_t id = 0; id < static_cast<int32_t>(c_.nodes.size()); ++id) {
      const Node& n = c_.nodes[id];
      if (n.kind != OpKind::kInput) continue;
      NoteDType(n.type.dtype);
      ps.push_back(absl::StrCat("const ", Storage(n.type.dtype), "* __restrict__ in", n.input_index));
    }
    for (int32_t id : p_.intermediates_read) {
      NoteDType(c_.nodes[id].type.dtype);
      ps.push_back(absl::StrCat("const ", Storage(c_.nodes[id].type.dtype), "* __restrict__ im", id));
    }
    const std::set<int32_t> results(p_.results.begin(), p_.results.end());
    for (size_t j = 0; j < c_.outputs.size(); ++j) {
      if (!results.count(c_.outputs[j])) continue;
      const DType t = c_.nodes[c_.outputs[j]].type.dtype;
      ps.push_back(absl::StrCat(OutputStorage(t, p_.numerics), "* __restrict__ out", j));
    }
    for (int32_t id : Written()) {
      ps.push_back(absl::StrCat(OutputStorage(c_.nodes[id].type.dtype, p_.numerics),
                                "* __restrict__ iw", id));
    }
    if (Fast() && p_.splitk > 1 && !p_.cluster) {
      ps.push_back("float* __restrict__ kf_ws");
      ps.push_back("int* __restrict__ kf_cnt");
    }
    for (int32_t s : p_.symbols) ps.push_back(absl::StrCat("long long s", s));
    return absl::StrJoin(ps, ", ");
  }

  void NoteDType(DType t) {
    if (t == DType::kBF16) needs_.bf16 = true;
    if (t == DType::kF16) needs_.half = true;
  }

  const std::vector<int32_t>& Written() const { return p_.written; }

  std::string Buffer(const Access& a) const {
    const std::string b = a.buffer.kind == BufferRef::Kind::kInput ? absl::StrCat("in", a.buffer.index)
                                                                   : absl::StrCat("im", a.node);
    return a.offset.is_const() && a.offset.value() == 0 ? b : absl::StrCat("(", b, " + ", SizeCode(a.offset), ")");
  }

  std::vector<std::string> BatchIdx() const {
    std::vector<std::string> out;
    for (size_t d = 0; d < p_.batch.size(); ++d) out.push_back(absl::StrCat("kf_b", d));
    return out;
  }

  // Operand base pointer at this CTA's batch: "in0 + kf_b0 * 1048576LL".
  std::string OperandBase(const Access& a) const {
    std::vector<SizeExpr> batch(a.strides.begin(), a.strides.end() - 2);
    const std::string off = Offset(batch, BatchIdx());
    return off == "0LL" ? Buffer(a) : absl::StrCat(Buffer(a), " + ", off);
  }

  // The stride between the rows of an operand's tile: A K-major has rows
  // of M, M-major rows of K; B K-major rows of N, N-major rows of K.
  std::string Lda() const {
    const size_t r = p_.a.strides.size();
    return SizeCode(p_.a_kmajor ? p_.a.strides[r - 2] : p_.a.strides[r - 1]);
  }
  std::string Ldb() const {
    const size_t r = p_.b.strides.size();
    return SizeCode(p_.b_kmajor ? p_.b.strides[r - 1] : p_.b.strides[r - 2]);
  }

  // Statements computing the epilogue's values at (eb, er, `col`) from
  // `acc` (the product's value in the compute numerics), each named
  // v<node><sfx>.
  absl::StatusOr<std::string> EpilogueValues(const std::string& acc, const std::string& col,
                                             const std::string& sfx, const std::string& ind) {
    std::string s;
    const DType mt = c_.nodes[p_.matmul].type.dtype;
    std::string v = acc;
    if (p_.numerics == Numerics::kEager) v = CastExpr(acc, DType::kF32, mt, p_.numerics, &needs_);
    absl::StrAppend(&s, ind, "const ", ComputeType(mt, p_.numerics), " v", p_.matmul, sfx, " = ", v,
                    ";\n");
    std::vector<std::string> idx = BatchIdx();
    idx.push_back("er");
    idx.push_back(col);
    for (const Access& a : p_.reads) {
      const std::string load = absl::StrCat(Buffer(a), "[", Offset(a.strides, idx), "]");
      absl::StrAppend(&s, ind, "const ", ComputeType(a.dtype, p_.numerics), " r", a.node, sfx,
                      " = ", LoadExpr(load, a.dtype, p_.numerics, &needs_), ";\n");
    }
    const std::set<int32_t> in_group(p_.epilogue.begin(), p_.epilogue.end());
    for (int32_t id : p_.epilogue) {
      const Node& n = c_.nodes[id];
      const std::string ct = ComputeType(n.type.dtype, p_.numerics);
      if (IsReduction(n.kind)) {  // The row yardstick's: a block per row.
        absl::StrAppend(&s, YardstickReduction(id, absl::StrCat("v", n.args[0], sfx), sfx, ind));
        continue;
      }
      KFUSE_ASSIGN_OR_RETURN(std::string e, NodeExpr(id, [&](int32_t a) {
        return absl::StrCat(a == p_.matmul || in_group.count(a) ? "v" : "r", a, sfx);
      }));
      absl::StrAppend(&s, ind, "const ", ct, " v", id, sfx, " = ", e, ";\n");
    }
    return s;
  }

  // Element-wise node `id` of the epilogue, its operands named by `name`
  // but for constants (literals).
  absl::StatusOr<std::string> NodeExpr(int32_t id,
                                       const std::function<std::string(int32_t)>& name) {
    std::vector<std::string> args;
    for (int32_t a : c_.nodes[id].args) {
      const Node& an = c_.nodes[a];
      args.push_back(an.kind == OpKind::kConstant
                         ? ConstantLiteral(an.value, an.type.dtype, p_.numerics)
                         : name(a));
    }
    return EmitOpExpr(c_, id, args, p_.numerics, &needs_);
  }

  // Reduction `id` of the row yardstick, over `operand` (each thread's
  // column): the block's values meet in kf_red and every thread adds them
  // in column order; eager rounds the result to its dtype as PyTorch's
  // reduction kernel stores it.
  std::string YardstickReduction(int32_t id, const std::string& operand, const std::string& sfx,
                                 const std::string& ind) {
    const Node& n = c_.nodes[id];
    const std::string ct = ComputeType(n.type.dtype, p_.numerics);
    std::string v = absl::StrCat("kf_t", id);
    // Max and min start from the first column, sums from zero.
    const bool minmax = n.kind == OpKind::kReduceMax || n.kind == OpKind::kReduceMin;
    std::string combine = absl::StrCat(v, " + kf_red[kf_c]");
    if (minmax) {
      needs_.minmax = true;
      combine = absl::StrCat(n.kind == OpKind::kReduceMax ? "kf_max(" : "kf_min(", v, ", kf_red[kf_c])");
    }
    std::string out = absl::StrCat(
        ind, "if (tid < N) kf_red[tid] = ", operand, ";\n", ind, "__syncthreads();\n", ind, ct,
        " ", v, " = ", minmax ? "kf_red[0]" : absl::StrCat("(", ct, ")0"), ";\n", ind,
        "for (long long kf_c = ", minmax ? "1" : "0", "; kf_c < N; ++kf_c) ", v, " = ", combine,
        ";\n", ind, "__syncthreads();\n");
    if (n.kind == OpKind::kReduceMean) absl::StrAppend(&out, ind, v, " = ", v, " / (", ct, ")N;\n");
    const std::string r = p_.numerics == Numerics::kEager
                              ? CastExpr(v, DType::kF32, n.type.dtype, p_.numerics, &needs_)
                              : v;
    absl::StrAppend(&out, ind, "const ", ct, " v", id, sfx, " = ", r, ";\n");
    return out;
  }

  // Stores every result at element kf_o: of the values suffixed _0 alone, or
  // (pair) of _0 and _1 at kf_o and kf_o + 1 in one access.
  std::string EpilogueStores(bool pair, const std::string& ind, bool per_row = false) {
    std::string s;
    auto store = [&](const std::string& ptr, int32_t id) {
      const DType t = c_.nodes[id].type.dtype;
      const std::string a = StoreExpr(absl::StrCat("v", id, "_0"), t, p_.numerics, &needs_);
      if (!pair) return absl::StrCat(ind, ptr, "[kf_o] = ", a, ";\n");
      const std::string b = StoreExpr(absl::StrCat("v", id, "_1"), t, p_.numerics, &needs_);
      const std::string pt = absl::StrCat("kf_pair<", OutputStorage(t, p_.numerics), ">");
      return absl::StrCat(ind, "*reinterpret_cast<", pt, "*>(", ptr, " + kf_o) = ", pt, "{", a,
                          ", ", b, "};\n");
    };
    std::set<int32_t> results;
    for (int32_t id : p_.results) {
      if (p_.per_row.count(id) == (per_row ? 1u : 0u)) results.insert(id);
    }
    for (size_t j = 0; j < c_.outputs.size(); ++j) {
      if (results.count(c_.outputs[j])) absl::StrAppend(&s, store(absl::StrCat("out", j), c_.outputs[j]));
    }
    for (int32_t id : Written()) {
      if (results.count(id)) absl::StrAppend(&s, store(absl::StrCat("iw", id), id));
    }
    return s;
  }

  // The results of one value per row (Plan::per_row).
  bool PerRowResults() const {
    return std::any_of(p_.results.begin(), p_.results.end(),
                       [&](int32_t id) { return p_.per_row.count(id) > 0; });
  }

  std::string Sizes() const {
    return absl::StrCat("  const long long M = ", SizeCode(DimSize(p_.m)),
                        ", N = ", SizeCode(DimSize(p_.n)), ", K = ", SizeCode(DimSize(p_.k)),
                        ";\n");
  }

  // The epilogue at (eb, er, ec) and (eb, er, ec + 1), the product's
  // values there `acc0` and `acc1` (`acc_e`: column ec + e), with the
  // stores: one paired store when N is even.
  absl::StatusOr<std::string> ElementEpilogue(const std::string& acc0, const std::string& acc1,
                                              const std::string& acc_e, const std::string& ind) {
    if (p_.pair) {
      KFUSE_ASSIGN_OR_RETURN(std::string first, EpilogueValues(acc0, "ec", "_0", ind + "  "));
      KFUSE_ASSIGN_OR_RETURN(std::string second, EpilogueValues(acc1, "(ec + 1)", "_1", ind + "  "));
      return absl::StrCat(ind, "const long long kf_o = (eb * M + er) * N + ec;\n", ind,
                          "if (ec + 1 < N) {\n", first, second, EpilogueStores(true, ind + "  "),
                          ind, "} else if (ec < N) {\n", first, EpilogueStores(false, ind + "  "),
                          ind, "}\n");
    }
    KFUSE_ASSIGN_OR_RETURN(std::string one, EpilogueValues(acc_e, "ec1", "_0", ind + "    "));
    return absl::StrCat(ind, "for (int e = 0; e < 2; ++e) {\n", ind,
                        "  const long long ec1 = ec + e;\n", ind, "  if (ec1 < N) {\n", one, ind,
                        "    const long long kf_o = (eb * M + er) * N + ec1;\n",
                        EpilogueStores(false, ind + "    "), ind, "  }\n", ind, "}\n");
  }

  absl::Status Kernel(std::string* out) {
    const std::string params = Params();
    if (!Fast()) return p_.Rows() ? RowYardstick(params, out) : Yardstick(params, out);
    if (p_.stream) return StreamKernel(params, out);
    // The epilogue runs on the accumulator pairs a lane holds (columns ec
    // and ec + 1 of a row).
    std::string epi;
    if (!p_.Rows()) {
      KFUSE_ASSIGN_OR_RETURN(epi, ElementEpilogue("acc[mt][nt][2 * h]", "acc[mt][nt][2 * h + 1]",
                                                  "acc[mt][nt][2 * h + e]", "          "));
    }
    std::string s = absl::StrCat(
        "extern \"C\" __global__ void ", ClusterDims(), "__launch_bounds__(kf_THREADS) ",
        kEntryPlaceholder, "(",
        params, ") {\n",
        "  extern __shared__ __align__(128) unsigned char kf_smem[];\n",
        "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n",
        "  const int warp_m = warp / kf_WN, warp_n = warp % kf_WN;\n", Sizes(),
        // Raster: groups of kf_GROUP tile rows sweep the tile columns, so
        // the operand tiles they share stay in L2.
        "  const long long tiles_m = (M + kf_BM - 1) / kf_BM, tiles_n = (N + kf_BN - 1) / kf_BN;\n",
        "  const long long pid = blockIdx.x, per_group = (long long)kf_GROUP * tiles_n;\n",
        "  const long long first_m = (pid / per_group) * kf_GROUP;\n",
        "  const long long gsize = min(tiles_m - first_m, (long long)kf_GROUP);\n",
        "  const long long m0 = (first_m + (pid % per_group) % gsize) * kf_BM;\n",
        "  const long long n0 = ((pid % per_group) / gsize) * kf_BN;\n",
        "  const long long eb = blockIdx.z;\n", BatchDecomposition(p_.batch),
        "  const unsigned short* A = (const unsigned short*)(", OperandBase(p_.a), ");\n",
        "  const unsigned short* B = (const unsigned short*)(", OperandBase(p_.b), ");\n",
        "  const long long lda = ", Lda(), ", ldb = ", Ldb(), ";\n");
    absl::StrAppend(
        &s,
        "  const long long kper = ((K + kf_SPLITK - 1) / kf_SPLITK + kf_BK - 1) / kf_BK * kf_BK;\n",
        "  const long long kbeg = blockIdx.y * kper, kend = min(K, kbeg + kper);\n",
        "  const int ktiles = kend > kbeg ? (int)((kend - kbeg + kf_BK - 1) / kf_BK) : 0;\n",
        "  const unsigned sbase = (unsigned)__cvta_generic_to_shared(kf_smem);\n",
        "  auto load = [&](int stage, long long k0) {\n",
        "    const unsigned sa = sbase + stage * kf_STAGE_BYTES, sb = sa + kf_BM * kf_BK * 2;\n",
        "    if constexpr (kf_A_KMAJOR) kf_load_tile<kf_BM, kf_BK>(sa, A, lda, m0, k0, M, kend, tid);\n",
        "    else kf_load_tile<kf_BK, kf_BM>(sa, A, lda, k0, m0, kend, M, tid);\n",
        "    if constexpr (kf_B_KMAJOR) kf_load_tile<kf_BN, kf_BK>(sb, B, ldb, n0, k0, N, kend, tid);\n",
        "    else kf_load_tile<kf_BK, kf_BN>(sb, B, ldb, k0, n0, kend, N, tid);\n",
        "  };\n",
        "  float acc[kf_MT][kf_NT][4];\n", kEachAccumulator,
        "        acc[mt][nt][q] = 0.f;\n", kEndEach,
        "#pragma unroll\n",
        "  for (int st = 0; st < kf_STAGES - 1; ++st) {\n",
        "    if (st < ktiles) load(st, kbeg + (long long)st * kf_BK);\n",
        "    kf_cp_commit();\n",
        "  }\n",
        // Fragments are double-buffered: step kk + 1's are read from shared
        // memory while step kk's products run, across stage boundaries too,
        // so the barrier that hands over a stage does not drain the tensor
        // pipe. A stage is refilled one step after the barrier that retired
        // it.
        "  kf_cp_wait<kf_STAGES - 2>();\n",
        "  __syncthreads();\n",
        "  unsigned af[2][kf_MT][4], bf[2][kf_NT][2];\n",
        "  int rs = 0, ws = kf_STAGES - 1;\n",
        "  kf_frags(af[0], bf[0], sbase, 0, warp_m, warp_n, lane);\n",
        "  for (int kt = 0; kt < ktiles; ++kt) {\n",
        "#pragma unroll\n",
        "    for (int kk = 0; kk < kf_KK; ++kk) {\n",
        "      if (kk == kf_KK - 1) {\n",
        "        kf_cp_wait<kf_STAGES - 2>();\n",
        "        __syncthreads();\n",
        "        rs = rs + 1 == kf_STAGES ? 0 : rs + 1;\n",
        "      }\n",
        "      kf_frags(af[(kk + 1) & 1], bf[(kk + 1) & 1], sbase + rs * kf_STAGE_BYTES, (kk + 1) % kf_KK,\n",
        "               warp_m, warp_n, lane);\n",
        "      if (kk == 0) {\n",
        "        const int nk = kt + kf_STAGES - 1;\n",
        "        if (nk < ktiles) load(ws, kbeg + (long long)nk * kf_BK);\n",
        "        kf_cp_commit();\n",
        "        ws = ws + 1 == kf_STAGES ? 0 : ws + 1;\n",
        "      }\n",
        "#pragma unroll\n",
        "      for (int mt = 0; mt < kf_MT; ++mt)\n",
        "#pragma unroll\n",
        "        for (int nt = 0; nt < kf_NT; ++nt) kf_mma(acc[mt][nt], af[kk & 1][mt], bf[kk & 1][nt]);\n",
        "    }\n",
        "  }\n",
        "  kf_cp_wait<0>();\n");
    if (p_.splitk > 1 && p_.cluster) {
      // The slices are one cluster: each CTA but slice 0's leaves its
      // partial tile in its shared memory (the stages are done with);
      // slice 0's adds them in slice order, as the workspace's last CTA
      // does, and runs the epilogue; the others leave once it has read.
      absl::StrAppend(
          &s, "  float* const kf_part = reinterpret_cast<float*>(kf_smem);\n",
          "  const unsigned kf_rank = kf_cluster_rank();\n",
          "  __syncthreads();\n",
          "  if (kf_rank != 0) {\n", kEachAccumulator,
          "        kf_part[kf_acc_at(mt, nt, q, warp_m, warp_n, lane)] = acc[mt][nt][q];\n", kEndEach,
          "  }\n",
          "  kf_cluster_arrive();\n",
          "  kf_cluster_wait();\n",
          "  if (kf_rank == 0) {\n", kEachAccumulator,
          "        float* const at = kf_part + kf_acc_at(mt, nt, q, warp_m, warp_n, lane);\n",
          "        for (unsigned r = 1; r < kf_SPLITK; ++r) acc[mt][nt][q] += kf_cluster_ld(at, r);\n",
          kEndEach,
          "  }\n",
          "  kf_cluster_arrive();\n",
          "  kf_cluster_wait();\n",
          "  if (kf_rank != 0) return;\n");
    } else if (p_.splitk > 1) {
      // Every slice's partial tile goes to the workspace; the last CTA of
      // the tile to arrive adds them in slice order (so the sum does not
      // depend on which CTA finished last) and runs the epilogue.
      absl::StrAppend(
          &s, "  int& kf_last = *reinterpret_cast<int*>(kf_smem + kf_STAGES * kf_STAGE_BYTES);\n",
          "  const long long tile = eb * (long long)gridDim.x + blockIdx.x;\n",
          "  float* part = kf_ws + tile * (long long)kf_SPLITK * (kf_BM * kf_BN);\n",
          kEachAccumulator,
          "        part[blockIdx.y * (kf_BM * kf_BN) + kf_acc_at(mt, nt, q, warp_m, warp_n, lane)] =\n",
          "            acc[mt][nt][q];\n", kEndEach,
          "  __threadfence();\n",
          "  __syncthreads();\n",
          "  if (tid == 0) kf_last = atomicAdd(kf_cnt + tile, 1) == kf_SPLITK - 1;\n",
          "  __syncthreads();\n",
          "  if (!kf_last) return;\n",
          "  __threadfence();\n",
          kEachAccumulator,
          "        const float* at = part + kf_acc_at(mt, nt, q, warp_m, warp_n, lane);\n",
          "        float sum = 0.f;\n",
          "        for (int sl = 0; sl < kf_SPLITK; ++sl) sum += __ldcg(at + sl * (kf_BM * kf_BN));\n",
          "        acc[mt][nt][q] = sum;\n", kEndEach,
          "  if (tid == 0) kf_cnt[tile] = 0;\n");
    }
    if (p_.Rows()) {
      KFUSE_ASSIGN_OR_RETURN(std::string rows, RowEpilogue());
      absl::StrAppend(&s, rows, "}\n");
      *out = std::move(s);
      return absl::OkStatus();
    }
    absl::StrAppend(
        &s, "#pragma unroll\n",
        "  for (int mt = 0; mt < kf_MT; ++mt)\n",
        "#pragma unroll\n",
        "    for (int nt = 0; nt < kf_NT; ++nt)\n",
        "#pragma unroll\n",
        "      for (int h = 0; h < 2; ++h) {\n",
        "        const long long er = m0 + warp_m * kf_TM + mt * 16 + (lane >> 2) + h * 8;\n",
        "        const long long ec = n0 + warp_n * kf_TN + nt * 8 + (lane & 3) * 2;\n",
        "        if (er < M) {\n", epi,
        "        }\n",
        "      }\n",
        "}\n");
    *out = std::move(s);
    return absl::OkStatus();
  }

  // The streaming schedule (Plan::stream): each warp walks its steps of the
  // CTA's K slice (every kf_WK-th step of 32) in batches of kf_STAGES steps,
  // the next batch's loads in flight while this one's products run; then
  // the warps' partial sums meet in shared
  // memory and are added in warp order; with split K the CTAs' sums then
  // meet in the workspace as the tiled schedule's do. The epilogue runs a
  // column pair a thread over the CTA's bm x bn outputs.
  absl::Status StreamKernel(const std::string& params, std::string* out) {
    const std::string ind = "      ";
    KFUSE_ASSIGN_OR_RETURN(std::string epi,
                           ElementEpilogue("kf_t0", "kf_t1", "(e ? kf_t1 : kf_t0)", ind));
    // B's chunk r of a step at k0: N-major rows k0 + 8c + r at columns 8g;
    // K-major columns 16 (r / 2) + 8 (r % 2) + g at k0 + 8c. Past K (when it
    // is not a whole number of steps) both operands read zeros. Columns past
    // N and rows past M are read at the last one instead (when N or M is not
    // a whole number of tiles): their products land in accumulators no one
    // stores.
    const bool whole_n = p_.n.is_static() && p_.n.size % p_.bn == 0;
    const bool whole_m = p_.m.is_static() && p_.m.size % p_.bm == 0;
    const bool whole_k = WholeK();
    const char* const b_within = p_.b_kmajor ? ", k0 + 8 * c < kend" : ", row < kend";
    const char* const a_within = ", k0 + 8 * c < kend";
    const std::string b_col =
        p_.b_kmajor ? "wcol + 16 * (r >> 1) + 8 * (r & 1) + g" : "wcol + 8 * g";
    const std::string b_chunk = absl::StrCat(
        "      const long long col = ",
        whole_n ? b_col : absl::StrCat("min(", b_col, p_.b_kmajor ? ", N - 1)" : ", N - 8)"),
        ";\n",
        p_.b_kmajor ? "" : "      const long long row = k0 + 8 * c + r;\n",
        "      w[r] = kf_ldg_stream(B + ", p_.b_kmajor ? "col * ldb + k0 + 8 * c" : "row * ldb + col",
        whole_k ? "" : b_within, ");\n");
    const std::string a_row = whole_m ? "m0 + mt * 8 + g" : "min(m0 + mt * 8 + g, M - 1)";
    std::string s = absl::StrCat(
        "extern \"C\" __global__ void ", ClusterDims(), "__launch_bounds__(kf_THREADS, 1) ",
        kEntryPlaceholder, "(",
        params, ") {\n",
        "  extern __shared__ __align__(16) unsigned char kf_smem[];\n",
        "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n",
        "  const int warp_n = warp % kf_WN, warp_k = warp / kf_WN, g = lane >> 2, c = lane & 3;\n",
        Sizes(),
        // Row tiles vary fastest, so the CTAs sharing a strip of B run
        // together and read it once from HBM.
        "  const long long tiles_m = (M + kf_BM - 1) / kf_BM;\n",
        "  const long long m0 = (blockIdx.x % tiles_m) * kf_BM, n0 = (blockIdx.x / tiles_m) * kf_BN;\n",
        "  const long long wcol = n0 + warp_n * 64;\n",
        "  const long long eb = blockIdx.z;\n", BatchDecomposition(p_.batch),
        "  const unsigned short* A = (const unsigned short*)(", OperandBase(p_.a), ");\n",
        "  const unsigned short* B = (const unsigned short*)(", OperandBase(p_.b), ");\n",
        "  const long long lda = ", Lda(), ", ldb = ", Ldb(), ";\n",
        "  const long long kper = ((K + kf_SPLITK - 1) / kf_SPLITK + 31) / 32 * 32;\n",
        "  const long long kbeg = blockIdx.y * kper, kend = min(K, kbeg + kper);\n",
        "  const int nsteps = kend > kbeg ? (int)((kend - kbeg + 31) / 32) : 0;\n",
        "  const int mine = nsteps > warp_k ? (nsteps - warp_k + kf_WK - 1) / kf_WK : 0;\n",
        // Step i of this warp: its loads, zero past the edges.
        "  auto load = [&](uint4 (&w)[8], uint4 (&x)[kf_MT], int i) {\n",
        "    const long long k0 = kbeg + (long long)(warp_k + i * kf_WK) * 32;\n",
        "#pragma unroll\n",
        "    for (int r = 0; r < 8; ++r) {\n", b_chunk, "    }\n",
        "#pragma unroll\n",
        "    for (int mt = 0; mt < kf_MT; ++mt) {\n",
        "      const long long row = ", a_row, ";\n",
        "      x[mt] = kf_ldg_cached(A + row * lda + k0 + 8 * c", whole_k ? "" : a_within, ");\n",
        "    }\n",
        "  };\n",
        "  float acc[kf_MT][4][4];\n",
        "#pragma unroll\n",
        "  for (int mt = 0; mt < kf_MT; ++mt)\n",
        "#pragma unroll\n",
        "    for (int j = 0; j < 4; ++j)\n",
        "#pragma unroll\n",
        "      for (int q = 0; q < 4; ++q) acc[mt][j][q] = 0.f;\n",
        "  uint4 w[kf_STAGES][8], x[kf_STAGES][kf_MT];\n",
        "#pragma unroll\n",
        "  for (int d = 0; d < kf_STAGES; ++d)", whole_k ? " if (d < mine)" : "",
        " load(w[d], x[d], d);\n",
        // A batch's products, then the next batch's loads together: refilling
        // each step's registers as soon as its products are done (a ring)
        // streamed B 8-10% slower, at any depth (run49).
        "  for (int i0 = 0; i0 < mine; i0 += kf_STAGES) {\n",
        "#pragma unroll\n",
        "    for (int d = 0; d < kf_STAGES; ++d)\n",
        "      if (i0 + d < mine) kf_stream_step(acc, w[d], x[d]);\n",
        whole_k ? "    if (i0 + 2 * kf_STAGES <= mine) {\n"
                  "#pragma unroll\n"
                  "      for (int d = 0; d < kf_STAGES; ++d) load(w[d], x[d], i0 + kf_STAGES + d);\n"
                  "    } else {\n"
                  "#pragma unroll\n"
                  "      for (int d = 0; d < kf_STAGES; ++d)\n"
                  "        if (i0 + kf_STAGES + d < mine) load(w[d], x[d], i0 + kf_STAGES + d);\n"
                  "    }\n"
                : "#pragma unroll\n"
                  "    for (int d = 0; d < kf_STAGES; ++d) load(w[d], x[d], i0 + kf_STAGES + d);\n",
        "  }\n",
        "  float* const red = reinterpret_cast<float*>(kf_smem);\n",
        "#pragma unroll\n",
        "  for (int mt = 0; mt < kf_MT; ++mt)\n",
        "#pragma unroll\n",
        "    for (int j = 0; j < 4; ++j)\n",
        "#pragma unroll\n",
        "      for (int q = 0; q < 4; ++q)\n",
        "        red[(warp_k * kf_BM + kf_stream_row(mt, q, c)) * kf_PITCH + warp_n * 64 +\n",
        "            kf_stream_col(j, q, g)] = acc[mt][j][q];\n",
        "  __syncthreads();\n");
    // The CTA's sum at (ml, nl) and (ml, nl + 1), warps in order.
    const std::string cta_sum =
        "    float kf_t0 = 0.f, kf_t1 = 0.f;\n"
        "    for (int wk = 0; wk < kf_WK; ++wk) {\n"
        "      kf_t0 += red[(wk * kf_BM + ml) * kf_PITCH + nl];\n"
        "      kf_t1 += red[(wk * kf_BM + ml) * kf_PITCH + nl + 1];\n"
        "    }\n";
    const std::string each =
        "  for (int idx = tid; idx < kf_BM * kf_BN / 2; idx += kf_THREADS) {\n"
        "    const int ml = idx / (kf_BN / 2), nl = 2 * (idx % (kf_BN / 2));\n";
    if (p_.splitk > 1 && p_.cluster) {
      // The slices are one cluster: each CTA's sum replaces its warp 0's
      // partial in shared memory; then the ranks share the tile's outputs,
      // each adding the slices' sums in slice order.
      absl::StrAppend(
          &s, each, cta_sum,
          "    red[ml * kf_PITCH + nl] = kf_t0;\n",
          "    red[ml * kf_PITCH + nl + 1] = kf_t1;\n",
          "  }\n",
          "  kf_cluster_arrive();\n",
          "  kf_cluster_wait();\n",
          "  for (int idx = kf_cluster_rank() * kf_THREADS + tid; idx < kf_BM * kf_BN / 2;\n",
          "       idx += kf_THREADS * kf_SPLITK) {\n",
          "    const int ml = idx / (kf_BN / 2), nl = 2 * (idx % (kf_BN / 2));\n",
          "    float kf_t0 = 0.f, kf_t1 = 0.f;\n",
          "    for (unsigned r = 0; r < kf_SPLITK; ++r) {\n",
          "      kf_t0 += kf_cluster_ld(red + ml * kf_PITCH + nl, r);\n",
          "      kf_t1 += kf_cluster_ld(red + ml * kf_PITCH + nl + 1, r);\n",
          "    }\n");
    } else if (p_.splitk > 1) {
      // Slices in order: each CTA's sum goes to the workspace, the last of
      // the tile's CTAs to arrive adds them and runs the epilogue.
      absl::StrAppend(
          &s, "  __shared__ int kf_last;\n",
          "  const long long tile = eb * (long long)gridDim.x + blockIdx.x;\n",
          "  float* part = kf_ws + tile * (long long)kf_SPLITK * (kf_BM * kf_BN);\n", each, cta_sum,
          "    *reinterpret_cast<float2*>(part + blockIdx.y * (kf_BM * kf_BN) + ml * kf_BN + nl) =\n",
          "        make_float2(kf_t0, kf_t1);\n",
          "  }\n",
          "  __threadfence();\n",
          "  __syncthreads();\n",
          "  if (tid == 0) kf_last = atomicAdd(kf_cnt + tile, 1) == kf_SPLITK - 1;\n",
          "  __syncthreads();\n",
          "  if (!kf_last) return;\n",
          "  __threadfence();\n", each,
          "    float kf_t0 = 0.f, kf_t1 = 0.f;\n",
          "    for (int sl = 0; sl < kf_SPLITK; ++sl) {\n",
          "      const float2 v = __ldcg(reinterpret_cast<const float2*>(part + sl * (kf_BM * kf_BN) +\n",
          "                                                             ml * kf_BN + nl));\n",
          "      kf_t0 += v.x;\n",
          "      kf_t1 += v.y;\n",
          "    }\n");
    } else {
      absl::StrAppend(&s, each, cta_sum);
    }
    absl::StrAppend(&s, "    const long long er = m0 + ml, ec = n0 + nl;\n", "    if (er < M) {\n",
                    epi, "    }\n", "  }\n");
    if (p_.splitk > 1 && p_.cluster) {
      absl::StrAppend(&s, "  kf_cluster_arrive();\n", "  kf_cluster_wait();\n");
    } else if (p_.splitk > 1) {
      absl::StrAppend(&s, "  if (tid == 0) kf_cnt[tile] = 0;\n");
    }
    absl::StrAppend(&s, "}\n");
    *out = std::move(s);
    return absl::OkStatus();
  }

  // The epilogue of a kernel that reduces rows, after the accumulators are
  // final (one tile column: n0 is 0; when N is the tile's width no column
  // needs a guard): node by node, each over all of a lane's values, held in arrays
  // the unrolled loops keep in registers: v<id>[kf_MT][2][kf_NT][2] per
  // element, v<id>[kf_MT][2] per row (the product is acc itself). Operands
  // of other buffers are read at clamped indices (values past the edges are
  // neither reduced nor stored). Then the stores: per element as the plain
  // epilogue's; per row by the first lane of each quad of the first warp
  // column.
  absl::StatusOr<std::string> RowEpilogue() {
    needs_.minmax = true;  // kRowBlocks' kf_max_op, kf_min_op.
    const std::set<int32_t> in_group(p_.epilogue.begin(), p_.epilogue.end());
    std::set<int32_t> read_ids;
    for (const Access& a : p_.reads) read_ids.insert(a.node);
    auto at = [&](int32_t a, const std::string& e) {
      if (a == p_.matmul) return absl::StrCat("acc[mt][nt][2 * h + ", e, "]");
      if (p_.per_row.count(a)) return absl::StrCat("v", a, "[mt][h]");
      if (in_group.count(a)) return absl::StrCat("v", a, "[mt][h][nt][", e, "]");
      return absl::StrCat("r", a);
    };
    std::vector<std::string> idx = BatchIdx();
    idx.push_back("er");
    idx.push_back("ec");
    const bool full = p_.n.size == p_.bn;
    // Warps sharing rows exchange through the stages' shared memory once
    // every warp is done with them; warps holding whole rows need neither.
    std::string s = p_.wn > 1 ? "  __syncthreads();  // The stages are free: the row exchange reuses them.\n"
                                "  float* const kf_xr = reinterpret_cast<float*>(kf_smem);\n"
                              : "  float* const kf_xr = nullptr;  // Warps hold whole rows.\n";
    for (int32_t id : p_.epilogue) {
      const Node& n = c_.nodes[id];
      const std::string ct = ComputeType(n.type.dtype, p_.numerics);
      if (IsReduction(n.kind)) {
        const bool max = n.kind == OpKind::kReduceMax, min = n.kind == OpKind::kReduceMin;
        const std::string identity = max   ? "__int_as_float(0xff800000)"
                                     : min ? "__int_as_float(0x7f800000)"
                                           : "0.f";
        const std::string op = max ? "kf_max_op()" : min ? "kf_min_op()" : "kf_sum_op()";
        absl::StrAppend(&s, "  float v", id, "[kf_MT][2];\n", EachValue(false),
                        "        float t = ", identity, ";\n",
                        "#pragma unroll\n        for (int nt = 0; nt < kf_NT; ++nt)\n",
                        "#pragma unroll\n          for (int e = 0; e < 2; ++e)\n",
                        "            ", full ? "" : "if (kf_col(warp_n, lane, nt, e) < N) ", "t = ", op, "(t, ",
                        at(n.args[0], "e"), ");\n", "        v", id, "[mt][h] = t;\n", kEndEach,
                        "  kf_row_reduce(v", id, ", kf_xr, warp_m, warp_n, lane, ", op, ");\n");
        if (n.kind == OpKind::kReduceMean) {
          absl::StrAppend(&s, EachValue(false), "        v", id, "[mt][h] = v", id,
                          "[mt][h] / (float)N;\n", kEndEach);
        }
        continue;
      }
      if (p_.per_row.count(id)) {
        KFUSE_ASSIGN_OR_RETURN(std::string e, NodeExpr(id, [&](int32_t a) { return at(a, "e"); }));
        absl::StrAppend(&s, "  ", ct, " v", id, "[kf_MT][2];\n", EachValue(false), "        v", id,
                        "[mt][h] = ", e, ";\n", kEndEach);
        continue;
      }
      std::string loads;
      for (int32_t a : n.args) {
        if (!read_ids.count(a)) continue;
        const Access& r = *std::find_if(p_.reads.begin(), p_.reads.end(),
                                        [&](const Access& x) { return x.node == a; });
        const std::string load = absl::StrCat(Buffer(r), "[", Offset(r.strides, idx), "]");
        absl::StrAppend(&loads, "          const ", ComputeType(r.dtype, p_.numerics), " r", a,
                        " = ", LoadExpr(load, r.dtype, p_.numerics, &needs_), ";\n");
      }
      if (!loads.empty()) {
        loads = absl::StrCat(
            "          const long long er = min(m0 + kf_row(warp_m, lane, mt, h), M - 1);\n",
            "          const long long ec = min((long long)kf_col(warp_n, lane, nt, e), N - 1);\n", loads);
      }
      KFUSE_ASSIGN_OR_RETURN(std::string e, NodeExpr(id, [&](int32_t a) { return at(a, "e"); }));
      const int32_t divisor = n.kind == OpKind::kDiv ? n.args[1] : -1;
      const Node* sum = divisor >= 0 ? &c_.nodes[divisor] : nullptr;
      if (sum && sum->kind == OpKind::kReduceSum && c_.nodes[sum->args[0]].kind == OpKind::kExp &&
          p_.per_row.count(divisor) && ct == "float" &&
          (n.type.dtype == DType::kBF16 || n.type.dtype == DType::kF16) &&
          c_.nodes[n.args[0]].kind != OpKind::kConstant) {
        // A 16-bit quotient by a row's sum of exponentials (softmax's, at
        // least 1 unless NaN): one reciprocal a row, then products, within
        // an ulp of f32's division and far inside the result's rounding; a
        // division per element takes a slow path for tiny quotients.
        absl::StrAppend(&s, "  float q", id, "[kf_MT][2];\n", EachValue(false), "        q", id,
                        "[mt][h] = __frcp_rn(", at(divisor, "e"), ");\n", kEndEach);
        e = absl::StrCat("(", at(n.args[0], "e"), " * q", id, "[mt][h])");
      }
      absl::StrAppend(&s, "  ", ct, " v", id, "[kf_MT][2][kf_NT][2];\n", EachValue(true), loads,
                      "          v", id, "[mt][h][nt][e] = ", e, ";\n", "        }\n");
    }
    // Per-element results: named as the plain epilogue's stores read them.
    // Column e of the pair as v<id>_<as>.
    auto alias = [&](int e, int as) {
      std::string a;
      for (int32_t id : p_.results) {
        if (p_.per_row.count(id)) continue;
        absl::StrAppend(&a, "            const ", ComputeType(c_.nodes[id].type.dtype, p_.numerics),
                        " v", id, "_", as, " = ", at(id, std::to_string(e)), ";\n");
      }
      return a;
    };
    const std::string ind = "          ";
    std::string stores;
    if (p_.pair && full) {
      stores = absl::StrCat(ind, "const long long kf_o = (eb * M + er) * N + ec;\n", alias(0, 0),
                            alias(1, 1), EpilogueStores(true, ind));
    } else if (p_.pair) {
      stores = absl::StrCat(ind, "const long long kf_o = (eb * M + er) * N + ec;\n", ind,
                            "if (ec + 1 < N) {\n", alias(0, 0), alias(1, 1),
                            EpilogueStores(true, ind + "  "), ind, "} else if (ec < N) {\n",
                            alias(0, 0), EpilogueStores(false, ind + "  "), ind, "}\n");
    } else {
      for (int e = 0; e < 2; ++e) {
        absl::StrAppend(&stores, ind, "if (ec + ", e, " < N) {\n", ind,
                        "  const long long kf_o = (eb * M + er) * N + ec + ", e, ";\n", alias(e, 0),
                        EpilogueStores(false, ind + "  "), ind, "}\n");
      }
    }
    absl::StrAppend(
        &s, "#pragma unroll\n  for (int mt = 0; mt < kf_MT; ++mt)\n",
        "#pragma unroll\n    for (int nt = 0; nt < kf_NT; ++nt)\n",
        "#pragma unroll\n      for (int h = 0; h < 2; ++h) {\n",
        "        const long long er = m0 + kf_row(warp_m, lane, mt, h);\n",
        "        const long long ec = kf_col(warp_n, lane, nt, 0);\n",
        "        if (er < M) {\n", stores, "        }\n      }\n");
    if (PerRowResults()) {
      std::string a;
      for (int32_t id : p_.results) {
        if (!p_.per_row.count(id)) continue;
        absl::StrAppend(&a, "          const ", ComputeType(c_.nodes[id].type.dtype, p_.numerics),
                        " v", id, "_0 = v", id, "[mt][h];\n");
      }
      absl::StrAppend(&s, "  if (warp_n == 0 && (lane & 3) == 0) {\n", EachValue(false),
                      "        const long long er = m0 + kf_row(warp_m, lane, mt, h);\n",
                      "        if (er < M) {\n          const long long kf_o = eb * M + er;\n", a,
                      EpilogueStores(false, "          ", /*per_row=*/true), "        }\n",
                      kEndEach, "  }\n");
    }
    return s;
  }

  // The row yardstick: a block per row of the product, a thread per column
  // (N <= kMaxEpilogueRow <= blockDim.x), each walking K as Yardstick's
  // threads do; reductions meet in shared memory (YardstickReduction).
  absl::Status RowYardstick(const std::string& params, std::string* out) {
    const std::string acc_t = p_.numerics == Numerics::kReference64 ? "double" : "float";
    KFUSE_ASSIGN_OR_RETURN(std::string epi, EpilogueValues("kf_acc", "ec", "_0", "  "));
    *out = absl::StrCat(
        "extern \"C\" __global__ void ", kEntryPlaceholder, "(", params, ") {\n", Sizes(),
        "  const int tid = threadIdx.x;\n",
        "  const long long er = blockIdx.x, eb = blockIdx.z, ec = tid < N ? tid : N - 1;\n",
        "  __shared__ ", acc_t, " kf_red[", kMaxEpilogueRow, "];\n", YardstickProduct(), epi,
        "  if (tid < N) {\n    const long long kf_o = (eb * M + er) * N + ec;\n",
        EpilogueStores(false, "    "), "  }\n");
    if (PerRowResults()) {
      absl::StrAppend(out, "  if (tid == 0) {\n    const long long kf_o = eb * M + er;\n",
                      EpilogueStores(false, "    ", /*per_row=*/true), "  }\n");
    }
    absl::StrAppend(out, "}\n");
    return absl::OkStatus();
  }

  // The yardsticks' walk along K at (eb, er, ec) into kf_acc: in double for
  // the reference, else f32 fma.
  std::string YardstickProduct() {
    const bool ref = p_.numerics == Numerics::kReference64;
    const size_t ra = p_.a.strides.size();
    const std::string la = LoadExpr(absl::StrCat("A[er * ", SizeCode(p_.a.strides[ra - 2]), " + kk * ",
                                                 SizeCode(p_.a.strides[ra - 1]), "]"),
                                    AB(), p_.numerics, &needs_);
    const size_t rb = p_.b.strides.size();
    const std::string lb = LoadExpr(absl::StrCat("B[kk * ", SizeCode(p_.b.strides[rb - 2]), " + ec * ",
                                                 SizeCode(p_.b.strides[rb - 1]), "]"),
                                    AB(), p_.numerics, &needs_);
    const std::string st = Storage(AB());
    return absl::StrCat(
        BatchDecomposition(p_.batch), "  const ", st, "* A = ", OperandBase(p_.a), ";\n",
        "  const ", st, "* B = ", OperandBase(p_.b), ";\n", "  ", ref ? "double" : "float",
        " kf_acc = 0;\n", "  for (long long kk = 0; kk < K; ++kk) {\n",
        ref ? absl::StrCat("    kf_acc += (double)(", la, ") * (double)(", lb, ");\n")
            : absl::StrCat("    kf_acc = fmaf(", la, ", ", lb, ", kf_acc);\n"),
        "  }\n");
  }

  // A thread per output element walks K: the float64 reference, or eager's
  // f32 product rounded to its dtype.
  absl::Status Yardstick(const std::string& params, std::string* out) {
    KFUSE_ASSIGN_OR_RETURN(std::string epi, EpilogueValues("kf_acc", "ec", "_0", "  "));
    absl::StrAppend(&epi, "  const long long kf_o = (eb * M + er) * N + ec;\n", EpilogueStores(false, "  "));
    *out = absl::StrCat(
        "extern \"C\" __global__ void ", kEntryPlaceholder, "(", params, ") {\n", Sizes(),
        // 16 x 16 tiles on grid.x (up to 2^31 - 1 blocks), down the rows
        // first so that neighbouring blocks read the same columns of B.
        "  const long long tiles_m = (M + 15) / 16;\n",
        "  const long long er = (blockIdx.x % tiles_m) * 16 + threadIdx.y,\n",
        "                  ec = (blockIdx.x / tiles_m) * 16 + threadIdx.x;\n",
        "  const long long eb = blockIdx.z;\n",
        "  if (er >= M || ec >= N) return;\n", YardstickProduct(), epi, "}\n");
    return absl::OkStatus();
  }


  const Chain& c_;
  const Plan& p_;
  PreludeNeeds needs_;
};

}  // namespace

absl::StatusOr<Source> WriteSource(const Chain& chain, const Plan& plan) {
  return Writer(chain, plan).Write();
}

}  // namespace kfuse::matmul_internal
