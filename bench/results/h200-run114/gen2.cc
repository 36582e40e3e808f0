// Dev tool: every variant of a row chain's space (rows symbolic, hint H),
// its source in v<i>.cu and a line of launch facts at rows A and B.
//   KIND=rms|softmax|ln gen2 f32|bf16 WIDTH H A B
#include <cstdio>
#include <fstream>
#include <string>
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/row_test_chains.h"
using namespace kfuse;
int main(int argc, char** argv) {
  const DType t = std::string(argv[1]) == "f32" ? DType::kF32 : DType::kBF16;
  const std::string kind = getenv("KIND") ? getenv("KIND") : "rms";
  const int64_t width = std::stoll(argv[2]), hint = std::stoll(argv[3]);
  const int64_t ra = std::stoll(argv[4]), rb = std::stoll(argv[5]);
  Chain c = kind == "rms" ? row_test::RmsNormResidual(t, -hint, width, false)
            : kind == "ln" ? row_test::LayerNorm(t, -hint, width)
                           : row_test::Softmax(t, -hint, width);
  KernelGroup g = PartitionChain(c)->kernels[0];
  int i = 0;
  for (const Variant& v : FamilySpace(c, g)) {
    auto k = EmitFamily(c, g, v);
    if (!k.ok()) { fprintf(stderr, "%s: %s\n", v.ToString().c_str(), k.status().ToString().c_str()); continue; }
    std::ofstream(("v" + std::to_string(i) + ".cu").c_str()) << k->source;
    std::string ps;
    for (const KernelParam& p : k->params) {
      if (p.kind == KernelParam::Kind::kBuffer) ps += p.buffer.kind == BufferRef::Kind::kInput ? "I" + std::to_string(p.buffer.index) : "O" + std::to_string(p.buffer.index);
      else if (p.kind == KernelParam::Kind::kScalar) ps += p.scalar_dtype == DType::kI32 ? "s" : "S";
      else if (p.kind == KernelParam::Kind::kWorkspace) ps += std::string("W") + (p.workspace_zeroed ? "z" : "");
      else ps += "T";
      ps += ",";
    }
    printf("v%d %s %u %lld %lld %lld %s %s\n", i, k->entry.c_str(), k->dynamic_smem_bytes,
           (long long)*k->block.x.Eval({ra}), (long long)*k->grid.x.Eval({ra}), (long long)*k->grid.x.Eval({rb}),
           ps.c_str(), v.ToString().c_str());
    ++i;
  }
}
