// Fuzzes source generation: every kernel of an accepted chain (each
// family: pointwise, row reductions, outer reductions, matmul, attention)
// goes through its family's heuristic, two of its space's
// variants and its emitter in all three Numerics, with the checks of
// GenerateChecked (fuzz_codegen.h).
#include <cstdint>

#include "kfuse/v1/kfuse.pb.h"
#include "tests/fuzz/chain_target.h"
#include "tests/fuzz/fuzz_codegen.h"

namespace {

void Check(const kfuse::v1::Chain& proto, uint64_t pick) {
  kfuse::fuzz::GenerateChecked(proto, pick, kfuse::fuzz::Coverage::kAll);
}

}  // namespace

KFUSE_CHAIN_FUZZ_TARGET(Check)
