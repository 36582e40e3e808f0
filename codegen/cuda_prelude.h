// The few helpers generated kernels need instead of toolkit headers (which
// generated source never includes, so NVRTC works where only its library is
// installed): fp16/bf16 storage types and conversions, vector access types,
// NaN-propagating min/max. Emitted only as needed, always in one order, so
// the same needs give byte-identical text.
//
//   PreludeNeeds needs;
//   needs.bf16 = true;
//   std::string src = CudaPrelude(needs) + body;
#ifndef KFUSE_CODEGEN_CUDA_PRELUDE_H_
#define KFUSE_CODEGEN_CUDA_PRELUDE_H_

#include <string>

namespace kfuse {

struct PreludeNeeds {
  bool half = false;         // __kf_half, kf_h2f, kf_f2h, kf_rh (round via f16).
  bool bf16 = false;         // __kf_bf16, kf_bf2f, kf_f2bf, kf_rbf.
  bool round_f64 = false;    // kf_rh / kf_rbf overloads for double (with half/bf16).
  bool vec = false;          // kf_vec<T, N>: aligned vector access.
  bool window = false;       // kf_ldw<T>: a vector read off its alignment (with vec).
  bool minmax = false;       // kf_max / kf_min (float, double, int).
  bool ipow = false;         // kf_ipow: integer power.
  bool minmax64 = false;     // kf_max / kf_min for long long (i64).
  bool ipow64 = false;       // kf_ipow for long long.
  bool tanh_approx = false;  // kf_tanh_approx: tanh.approx.f32.
  bool sincos_fast = false;  // kf_sin / kf_cos: MUFU for moderate arguments.
  bool exp_fast = false;     // kf_exp_fast: ex2.approx.ftz of x * log2(e).
  bool mul3 = false;         // kf_mul3: a product of three floats rounded once.
  bool outlined_math = false;  // kf_{sin,cos,pow}{f,}_ol: the accurate functions
                               // out of line (chains with many of them).
  bool cluster = false;      // kf_cluster_rank, _arrive, _wait, _ld: a cluster's
                             // barrier and distributed shared memory (sm_90).
};

// The helper definitions for `needs`; "" when nothing is needed.
std::string CudaPrelude(const PreludeNeeds& needs);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_CUDA_PRELUDE_H_
