// A structure-aware mutator for kfuse.v1.Chain, shared by the fuzz targets:
// libprotobuf-mutator is not packaged, and byte mutations of a serialised
// proto rarely survive translation, so each step parses the input, makes one
// structural change and serialises it back.
//
//   extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* d, size_t n, size_t max, unsigned seed) {
//     return kfuse::fuzz::MutateSerializedChain(d, n, max, seed);
//   }
//
// Client text the mutator makes (tensor, output and symbol names) always
// contains kClientMarker, so a target can check that none of it reaches
// generated source.
#ifndef KFUSE_TESTS_FUZZ_CHAIN_MUTATOR_H_
#define KFUSE_TESTS_FUZZ_CHAIN_MUTATOR_H_

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kfuse/v1/kfuse.pb.h"

namespace kfuse::fuzz {

inline constexpr char kClientMarker[] = "Zq9_";

// One random structural change: add/remove/duplicate/swap an op, change an
// op kind (invalid values too), an arg Ref (forward and out of range too), a
// dtype, shape, dim, stride or attribute, a constant (NaN, inf, huge,
// denormal), add/remove outputs, rename symbols, or start a fresh small chain.
void MutateChain(v1::Chain* chain, std::mt19937_64& rng);

// libFuzzer's custom mutator: the input parsed as a Chain (an empty chain
// when it does not parse), one MutateChain step (or, one time in eight, a
// plain byte mutation through LLVMFuzzerMutate), serialised back into data.
// Returns the new size (<= max_size).
size_t MutateSerializedChain(uint8_t* data, size_t size, size_t max_size, unsigned seed);

// Drops protobuf's log lines (invalid UTF-8 in a string field is logged on
// every parse of such an input): call from LLVMFuzzerInitialize.
void SilenceProtobufLogs();

// Every piece of client text in `chain` containing kClientMarker: input and
// output names and symbol names.
std::vector<std::string> MarkedClientStrings(const v1::Chain& chain);

}  // namespace kfuse::fuzz

#endif  // KFUSE_TESTS_FUZZ_CHAIN_MUTATOR_H_
