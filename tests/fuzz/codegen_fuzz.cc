// Fuzzes source generation: every kernel of an accepted chain (each
// family: pointwise, row reductions, outer reductions, matmul, attention)
// goes through its family's heuristic, two of its space's
// variants and its emitter in all three Numerics, with the checks of
// GenerateChecked (fuzz_codegen.h).
#include <cstddef>
#include <cstdint>

#include "kfuse/v1/kfuse.pb.h"
#include "tests/fuzz/chain_mutator.h"
#include "tests/fuzz/fuzz_codegen.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  kfuse::fuzz::SilenceProtobufLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kfuse::v1::Chain proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  uint64_t pick = 0;
  for (size_t i = 0; i < size; ++i) pick = pick * 31 + data[i];
  kfuse::fuzz::GenerateChecked(proto, pick, kfuse::fuzz::Coverage::kAll);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  return kfuse::fuzz::MutateSerializedChain(data, size, max_size, seed);
}
