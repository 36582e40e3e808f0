// Prints the attention yardsticks' sources (kReference64, kEager) for the
// S = 16384 bench case's shape and for a masked GQA chain with lse, each
// with its entry renamed to PREFIX_<ref|eager>_<case>.
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_replace.h"
#include "codegen/attention.h"
#include "codegen/attention_test_chains.h"
#include "codegen/partition.h"

using namespace kfuse;

int main(int argc, char** argv) {
  const std::string prefix = argc > 1 ? argv[1] : "x";
  struct C { const char* name; attention_test::Options o; };
  attention_test::Options big;
  big.batch = 1; big.heads = 32; big.kv_heads = 32; big.sq = big.sk = 16384; big.d = big.dv = 128;
  attention_test::Options masked;
  masked.heads = 8; masked.kv_heads = 2; masked.sq = 300; masked.sk = 260; masked.mask = true;
  masked.lengths = true; masked.lse = true; masked.causal = true;
  for (const C& c : {C{"big", big}, C{"masked", masked}}) {
    const Chain chain = attention_test::Attention(c.o);
    auto part = PartitionChain(chain);
    if (!part.ok()) { fprintf(stderr, "%s\n", part.status().ToString().c_str()); return 1; }
    const KernelGroup& g = part->kernels[0];
    for (Numerics n : {Numerics::kReference64, Numerics::kEager}) {
      auto k = EmitAttention(chain, g, AttentionHeuristic(chain, g), n);
      if (!k.ok()) { fprintf(stderr, "%s\n", k.status().ToString().c_str()); return 1; }
      const std::string name = prefix + "_" + (n == Numerics::kEager ? "eager" : "ref") + "_" + c.name;
      std::ofstream(name + ".cu") << absl::StrReplaceAll(k->source, {{k->entry, name}});
    }
  }
  return 0;
}
