// Source generation for a fuzzed chain with the launch-contract and
// client-text checks, shared by codegen_fuzz and the NVRTC compile sample.
//
//   std::vector<KernelSpec> specs = GenerateChecked(proto, /*pick=*/seed, Coverage::kAll);
//   // empty: refused (as InvalidArgument/Unimplemented); a broken invariant traps.
#ifndef KFUSE_TESTS_FUZZ_FUZZ_CODEGEN_H_
#define KFUSE_TESTS_FUZZ_FUZZ_CODEGEN_H_

#include <cstdint>
#include <vector>

#include "core/launch.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse::fuzz {

enum class Coverage {
  kHeuristic,  // The heuristic variant (what a cache miss serves), all three Numerics.
  kAll,        // Heuristic and two space variants (chosen by `pick`), all three Numerics.
  kSpace,      // Every space variant, as the tuner compiles them (Numerics::kFast only).
};

// Translates, canonicalises and partitions `proto`, then emits every
// kernel of every family. Traps on a broken invariant: a refusal that is not
// InvalidArgument/Unimplemented; a heuristic or space variant CanGenerate
// refuses; an emit failure for a generatable variant; "#include" in source;
// an entry that is not [A-Za-z_][A-Za-z0-9_]* or missing from the source;
// client text (kClientMarker strings) in source; a params list that is not
// every input, then the outputs the kernel writes, then ascending symbols
// and its workspaces, or that disagrees with the entry's signature; a chain
// output that the plan's kernels (their heuristic fast kernels, when every
// group generates) do not write, or, in a plan of pointwise kernels alone,
// write more than once.
std::vector<KernelSpec> GenerateChecked(const v1::Chain& proto, uint64_t pick, Coverage coverage);

}  // namespace kfuse::fuzz

#endif  // KFUSE_TESTS_FUZZ_FUZZ_CODEGEN_H_
