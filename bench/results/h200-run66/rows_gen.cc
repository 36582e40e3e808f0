// Dev tool: the generated source of one row variant of softmax over rows.
//   gen f32|bf16 ROWS WIDTH 'param=value,...'   (ROWS < 0: a symbol, hint -ROWS)
#include <cstdio>
#include <string>
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/row_test_chains.h"
using namespace kfuse;
int main(int argc, char** argv) {
  const DType t = std::string(argv[1]) == "f32" ? DType::kF32 : DType::kBF16;
  Chain c = row_test::Softmax(t, std::stoll(argv[2]), std::stoll(argv[3]));
  KernelGroup g = PartitionChain(c)->kernels[0];
  Variant v = FamilyHeuristic(c, g);
  if (argc > 4) {
    for (absl::string_view kv : absl::StrSplit(argv[4], ',')) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
      int64_t x; absl::SimpleAtoi(p.second, &x); v.params[p.first] = x;
    }
  }
  auto k = EmitFamily(c, g, v);
  if (!k.ok()) { fprintf(stderr, "%s\n", k.status().ToString().c_str()); return 1; }
  fprintf(stderr, "%s smem %u\n", v.ToString().c_str(), k->dynamic_smem_bytes);
  printf("%s", k->source.c_str());
}
