// Per-element CUDA C++ expressions for the IR's element-wise ops, shared by
// every generator that computes element-wise work (pointwise kernels, row
// reductions' prologues and epilogues, matmul epilogues), so the numerics of
// an op are written down once.
//
//   PreludeNeeds needs;
//   absl::StatusOr<std::string> e =
//       EmitOpExpr(chain, node_id, {"v1", "v2"}, Numerics::kFast, &needs);
//   // e == "(v1 + v2)"; CudaPrelude(needs) holds the helpers it calls.
//
// Values live in a "compute type" per dtype: kFast and kEager hold
// f32/f16/bf16 in float, kReference64 in double; i32 is int, bool is bool.
#ifndef KFUSE_CODEGEN_EMIT_SCALAR_H_
#define KFUSE_CODEGEN_EMIT_SCALAR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/cuda_prelude.h"
#include "codegen/ir.h"
#include "core/dtype.h"

namespace kfuse {

// How a generated kernel computes.
enum class Numerics {
  // The product kernel: loads the storage type, computes in f32 (ints in
  // int), stores the output dtype. Fast intrinsics only where the node's
  // dtype is f16/bf16 and their error stays under that dtype's rounding.
  kFast,
  // The GPU reference: every float op in double, accurate libm functions,
  // outputs written as double. Explicit casts still round (they are part of
  // the function being computed).
  kReference64,
  // Eager PyTorch: each op in f32 with accurate functions, every f16/bf16
  // node's result rounded to its dtype, as eager stores each intermediate;
  // f32 add/sub/mul as __fadd_rn & co. so no FMA contraction spans two ops.
  kEager,
};

// "float", "double", "int" or "bool": the type a value of `t` is held in.
std::string ComputeType(DType t, Numerics n);

// The value `v` (exact in `t`, as validation guarantees for constants) as a
// literal of the compute type of `t`: hex floats ("0x1.8p+1f"), decimal ints,
// "true"/"false". Never any other spelling of client data.
std::string ConstantLiteral(double v, DType t, Numerics n);

// Converts a compute value of dtype `from` to the compute type of `to`
// without rounding to `to` (type promotion; bool becomes 0/1, float to bool
// is != 0). Explicit casts use CastExpr.
std::string PromoteExpr(const std::string& v, DType from, DType to, Numerics n);

// An explicit cast: like PromoteExpr, but float results are rounded to `to`
// (an explicit cast to bf16 rounds even if the next op computes in f32) and
// float to int truncates toward zero.
std::string CastExpr(const std::string& v, DType from, DType to, Numerics n,
                     PreludeNeeds* needs);

// A value of dtype `t` stored as double (an earlier kernel's result, as
// kReference64 kernels write it) as a kReference64 compute value.
std::string LoadDoubleExpr(const std::string& storage, DType t);

// A loaded storage value (an lvalue of DTypeStorage(t)) as a compute value.
std::string LoadExpr(const std::string& storage, DType t, Numerics n,
                     PreludeNeeds* needs);

// A compute value of dtype `t` as the value stored into an output. For
// kReference64 every output buffer is double, so the result is a double.
std::string StoreExpr(const std::string& v, DType t, Numerics n,
                      PreludeNeeds* needs);

// The storage type of an output buffer of dtype `t` under `n`.
std::string OutputStorage(DType t, Numerics n);

// The value of element-wise node `node` of validated `chain`, given its
// operands as compute-value expressions of their own dtypes. kExpand is the
// identity (broadcasting is the caller's indexing). Errors: Unimplemented
// for ops that are not element-wise or dtypes without element-wise support.
absl::StatusOr<std::string> EmitOpExpr(const Chain& chain, int32_t node,
                                       const std::vector<std::string>& args,
                                       Numerics n, PreludeNeeds* needs);

// The qualifier of a generated element function computing `ops` nodes:
// __forceinline__, or __noinline__ past 64 ops, where a call costs nothing
// beside the body and inlining it at every unrolled call site (nine in a
// pointwise kernel) made NVRTC take 45 s and 690 MB for 511 chained logs,
// against 1.6 s and 146 MB out of line.
const char* ElementFnQualifier(int ops);
// Whether an element function of `ops` ops is called out of line.
bool ElementFnOutOfLine(int ops);

// Shared by the generators' writers:
// "fast", "reference64" or "eager", as generated headers name the numerics.
std::string NumericsName(Numerics n);
// The 64-bit FNV-1a hash of generated text (kernel entry names come from it).
uint64_t SourceHash(const std::string& text);
// A dim as a C++ expression: "4096LL", or its symbol's kernel parameter "s0".
std::string DimCode(const Dim& d);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_EMIT_SCALAR_H_
