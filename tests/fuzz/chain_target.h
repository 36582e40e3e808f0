// The libFuzzer entry points of a target whose inputs are serialised
// kfuse.v1.Chain messages: protobuf's log lines silenced, each input parsed
// (one that does not parse is skipped), `check` called with the chain and a
// number drawn from the input's bytes (to pick variants or outcomes), and
// the structure-aware mutator (chain_mutator.h).
//
//   void Check(const kfuse::v1::Chain& chain, uint64_t pick);
//   KFUSE_CHAIN_FUZZ_TARGET(Check)
#ifndef KFUSE_TESTS_FUZZ_CHAIN_TARGET_H_
#define KFUSE_TESTS_FUZZ_CHAIN_TARGET_H_

#include <cstddef>
#include <cstdint>

#include "kfuse/v1/kfuse.pb.h"
#include "tests/fuzz/chain_mutator.h"

#define KFUSE_CHAIN_FUZZ_TARGET(check)                                                   \
  extern "C" int LLVMFuzzerInitialize(int*, char***) {                                   \
    kfuse::fuzz::SilenceProtobufLogs();                                                  \
    return 0;                                                                            \
  }                                                                                      \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {              \
    kfuse::v1::Chain proto;                                                              \
    if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;                   \
    uint64_t pick = 0;                                                                   \
    for (size_t i = 0; i < size; ++i) pick = pick * 31 + data[i];                        \
    check(proto, pick);                                                                  \
    return 0;                                                                            \
  }                                                                                      \
  extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, \
                                            unsigned int seed) {                         \
    return kfuse::fuzz::MutateSerializedChain(data, size, max_size, seed);               \
  }

#endif  // KFUSE_TESTS_FUZZ_CHAIN_TARGET_H_
