// Dev tool: the generated source of one matmul variant of act(x @ w + bias).
#include <cstdio>
#include <string>
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "codegen/generators.h"
#include "codegen/matmul_test_chains.h"
using namespace kfuse;
int main(int argc, char** argv) {
  const int64_t m = std::stoll(argv[1]);
  Chain c = matmul_test::Linear(DType::kBF16, m, 8192, 8192);
  KernelGroup g = matmul_test::WholeGroup(c);
  Variant v = FamilyHeuristic(c, g);
  if (argc > 2) {
    for (absl::string_view kv : absl::StrSplit(argv[2], ',')) {
      std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
      int64_t x; absl::SimpleAtoi(p.second, &x); v.params[p.first] = x;
    }
  }
  auto k = EmitFamily(c, g, v);
  if (!k.ok()) { fprintf(stderr, "%s\n", k.status().ToString().c_str()); return 1; }
  fprintf(stderr, "%s smem %u\n", v.ToString().c_str(), k->dynamic_smem_bytes);
  fprintf(stderr, "LAUNCH %s %u %s %s %s %s %s %s %u\n", k->entry.c_str(), k->dynamic_smem_bytes, k->grid.x.ToString().c_str(), k->grid.y.ToString().c_str(), k->grid.z.ToString().c_str(), k->block.x.ToString().c_str(), k->block.y.ToString().c_str(), k->block.z.ToString().c_str(), k->cluster_x);
  fprintf(stderr, "params %zu ws %d\n", k->params.size(), (int)(k->params.size()>4));
  printf("%s", k->source.c_str());
}
