// Internal to the attention family: the checked plan the emitter writes from.
#ifndef KFUSE_CODEGEN_ATTENTION_PLAN_H_
#define KFUSE_CODEGEN_ATTENTION_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/attention.h"
#include "codegen/matmul_plan.h"

namespace kfuse::attention_internal {

using matmul_internal::Access;

struct Plan {
  Numerics numerics = Numerics::kFast;
  AttentionMatch m;
  // Strides over [batch.., Sq, D] (Q), [batch.., Sk, D] (K, a row per key)
  // and [batch.., Sk, Dv] (V); the last of each is 1.
  Access q, k, v;
  std::vector<Dim> batch;
  SizeExpr batches = SizeExpr::Const(1);
  Dim sq, sk;
  int d = 0, dv = 0;
  // What the score function reads, over [batch.., Sq, Sk]; what the
  // epilogue reads, over [batch.., Sq, Dv].
  std::vector<Access> score_reads, epilogue_reads;
  // Outputs laid out by a permute in the epilogue (stored dense in their
  // own shape): their strides over [batch.., Sq, Dv]. Other outputs of pv's
  // shape are dense over it.
  std::map<int32_t, std::vector<SizeExpr>> laid_out;
  std::vector<int32_t> symbols;  // Ascending.
  std::vector<Precondition> preconditions;
  // Schedule (kFast only).
  int bq = 128, bkv = 64, warps = 4, order = 0;
  // Query rows a yardstick block takes (kReference64, kEager): 8, or Sq
  // when it is static and smaller.
  int yard_rows = 8;
  int smem_bytes = 0;
};

absl::StatusOr<Plan> MakePlan(const Chain& chain, const KernelGroup& group,
                              const Variant& variant, Numerics numerics);

absl::StatusOr<matmul_internal::Source> WriteSource(const Chain& chain, const Plan& plan);

}  // namespace kfuse::attention_internal

#endif  // KFUSE_CODEGEN_ATTENTION_PLAN_H_
