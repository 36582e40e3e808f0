#include "tests/fuzz/fuzz_codegen.h"

#include <algorithm>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "codegen/canonicalize.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "service/translate.h"
#include "tests/fuzz/chain_mutator.h"
#include "tests/fuzz/fuzz_check.h"

namespace kfuse::fuzz {
namespace {

bool IsIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  });
}

// The number of parameters in the entry's signature in `source`.
int SignatureParams(const std::string& source, const std::string& entry) {
  size_t at = source.find(" " + entry + "(");
  if (at == std::string::npos) return -1;
  size_t open = at + entry.size() + 1, close = source.find(')', open);
  if (close == std::string::npos) return -1;
  std::string list = source.substr(open + 1, close - open - 1);
  if (list.find_first_not_of(" \n") == std::string::npos) return 0;
  return 1 + static_cast<int>(std::count(list.begin(), list.end(), ','));
}

void CheckSpec(const KernelSpec& spec, const Chain& chain, const KernelGroup& group,
               const std::vector<int32_t>& intermediates, bool sole_kernel,
               const std::vector<std::string>& client) {
  const std::string& src = spec.source;
  FUZZ_CHECK(IsIdentifier(spec.entry) && spec.entry.size() <= 64, "entry '" << spec.entry << "'");
  FUZZ_CHECK(src.find("#include") == std::string::npos, "#include in source\n" << src);
  for (const std::string& s : client) {
    FUZZ_CHECK(src.find(s) == std::string::npos, "client text '" << s << "' in source\n" << src);
  }
  // Every input, in order; the intermediates it reads (other kernels'
  // results), ascending; the input slices it reads in place; the outputs
  // the group writes, ascending (those it computes, and ones naming an
  // input or constant, which it copies; all of them when it is the only
  // kernel); the intermediates it writes (its group's), ascending; then
  // ascending symbols.
  // A kernel may compute a node another kernel writes (element-wise work is
  // recomputed, not stored): what it writes are its results.
  const std::set<int32_t> computed(group.nodes.begin(), group.nodes.end());
  const std::set<int32_t> written(group.results.begin(), group.results.end());
  size_t writes = 0;
  for (size_t i = 0; i < spec.params.size(); ++i) {
    writes += spec.params[i].kind == KernelParam::Kind::kBuffer &&
              spec.params[i].buffer.kind == BufferRef::Kind::kOutput;
  }
  size_t must_write = 0;
  for (int32_t out : chain.outputs) must_write += sole_kernel || written.count(out);
  FUZZ_CHECK(writes >= must_write, writes << " output params, " << must_write << " outputs");
  size_t i = 0;
  const size_t n_in = static_cast<size_t>(chain.num_inputs());
  for (; i < spec.params.size() && i < n_in; ++i) {
    const KernelParam& p = spec.params[i];
    FUZZ_CHECK(p.kind == KernelParam::Kind::kBuffer && p.buffer.kind == BufferRef::Kind::kInput &&
                   p.buffer.index == i,
               "param " << i << " is not input " << i);
  }
  FUZZ_CHECK(i == n_in, "fewer params than inputs");
  auto intermediate = [&](size_t at) {
    return at < spec.params.size() && spec.params[at].kind == KernelParam::Kind::kBuffer &&
           spec.params[at].buffer.kind == BufferRef::Kind::kIntermediate;
  };
  int64_t last = -1;
  for (; intermediate(i) && !computed.count(spec.params[i].buffer.index); ++i) {
    const uint32_t node = spec.params[i].buffer.index;
    FUZZ_CHECK(static_cast<int64_t>(node) > last && node < chain.nodes.size() &&
                   std::count(intermediates.begin(), intermediates.end(), node) == 1,
               "param " << i << " is not the next intermediate the kernel reads");
    last = node;
  }
  // Slices of inputs it reads in place: each an input's buffer again, at
  // strides and an offset of its own.
  while (i < spec.params.size() && spec.params[i].kind == KernelParam::Kind::kBuffer &&
         spec.params[i].buffer.kind == BufferRef::Kind::kInput) {
    FUZZ_CHECK(spec.params[i].buffer.index < n_in, "param " << i << " is a view of no input");
    ++i;
  }
  last = -1;
  for (size_t k = 0; k < writes; ++k, ++i) {
    FUZZ_CHECK(i < spec.params.size(), "missing output params");
    const KernelParam& p = spec.params[i];
    FUZZ_CHECK(p.kind == KernelParam::Kind::kBuffer && p.buffer.kind == BufferRef::Kind::kOutput &&
                   static_cast<int64_t>(p.buffer.index) > last &&
                   p.buffer.index < chain.outputs.size() &&
                   (written.count(chain.outputs[p.buffer.index]) ||
                    chain.nodes[chain.outputs[p.buffer.index]].kind == OpKind::kInput ||
                    chain.nodes[chain.outputs[p.buffer.index]].kind == OpKind::kConstant),
               "param " << i << " is not the next output the kernel writes");
    last = p.buffer.index;
  }
  last = -1;
  for (; intermediate(i); ++i) {
    const uint32_t node = spec.params[i].buffer.index;
    FUZZ_CHECK(static_cast<int64_t>(node) > last &&
                   std::count(group.intermediates.begin(), group.intermediates.end(), node) == 1,
               "param " << i << " is not the next intermediate the kernel writes");
    last = node;
  }
  // Then symbols, ascending, and workspaces (a reduction's slices, matmul's
  // split K, the row family's row counter), each sized by an expression the
  // launcher evaluates, in the order the family's contract puts them.
  last = -1;
  for (; i < spec.params.size(); ++i) {
    const KernelParam& p = spec.params[i];
    if (p.kind == KernelParam::Kind::kWorkspace) {
      FUZZ_CHECK(p.workspace_bytes.Eval(std::vector<int64_t>(chain.symbols.size(), 7)).ok(),
                 "param " << i << ": a workspace whose size does not evaluate");
      continue;
    }
    FUZZ_CHECK(p.kind == KernelParam::Kind::kScalar && p.value.kind() == SizeExpr::Kind::kSymbol &&
                   p.value.value() > last &&
                   p.value.value() < static_cast<int64_t>(chain.symbols.size()),
               "param " << i << " is not the next symbol (kind " << static_cast<int>(p.kind)
                        << ", buffer " << static_cast<int>(p.buffer.kind) << ":" << p.buffer.index
                        << ")\n" << ToString(chain) << src);
    last = p.value.value();
  }
  int sig = SignatureParams(src, spec.entry);
  FUZZ_CHECK(sig == static_cast<int>(spec.params.size()),
             "signature has " << sig << " params, contract " << spec.params.size() << "\n" << src);
}

}  // namespace

std::vector<KernelSpec> GenerateChecked(const v1::Chain& proto, uint64_t pick, Coverage coverage) {
  std::vector<KernelSpec> specs;
  absl::StatusOr<Chain> typed = TranslateChain(proto);
  if (!typed.ok()) {
    FUZZ_CHECK(IsClientError(typed.status()), typed.status());
    return specs;
  }
  const Chain chain = Canonicalize(*typed);
  absl::StatusOr<Partition> partition = PartitionChain(chain);
  if (!partition.ok()) {
    FUZZ_CHECK(IsClientError(partition.status()), partition.status() << "\n" << ToString(chain));
    return specs;
  }
  FUZZ_CHECK(!partition->kernels.empty() || chain.outputs.empty() ||
                 std::all_of(chain.outputs.begin(), chain.outputs.end(),
                             [&](int32_t o) { return chain.nodes[o].kind == OpKind::kInput ||
                                                     chain.nodes[o].kind == OpKind::kConstant; }),
             "no kernels for a chain that computes\n" << ToString(chain));
  const std::vector<std::string> client = MarkedClientStrings(proto);
  // How many kernels write each chain output (the heuristic's fast kernel
  // of each group), when every group generates.
  std::vector<int> writers(chain.outputs.size(), 0);
  bool every_group = true;
  for (const KernelGroup& group : partition->kernels) {
    std::vector<Variant> variants = {FamilyHeuristic(chain, group)};
    absl::Status can = CanGenerateFamily(chain, group, variants[0]);
    if (!can.ok()) {
      // Groups the family does not cover; never a bad heuristic variant.
      FUZZ_CHECK(can.code() == absl::StatusCode::kUnimplemented, can << "\n" << ToString(chain));
      every_group = false;
      continue;
    }
    std::vector<Numerics> numerics = {Numerics::kFast, Numerics::kReference64, Numerics::kEager};
    if (coverage != Coverage::kHeuristic) {
      std::vector<Variant> space = FamilySpace(chain, group);
      // A few dozen variants a family (the tuner searches them within its
      // budget); far more would be a runaway space.
      FUZZ_CHECK(!space.empty() && space.size() <= 128,
                 space.size() << " " << FamilyName(group.family) << " variants\n" << ToString(chain));
      if (coverage == Coverage::kSpace) {
        variants = std::move(space);
        numerics = {Numerics::kFast};
      } else {
        variants.push_back(space[pick % space.size()]);
        variants.push_back(space[(pick / 64 + space.size() / 2) % space.size()]);
      }
    }
    for (const Variant& v : variants) {
      absl::Status ok = CanGenerateFamily(chain, group, v);
      FUZZ_CHECK(ok.ok(), "space variant refused: " << ok << "\n" << ToString(chain));
      for (Numerics n : numerics) {
        absl::StatusOr<KernelSpec> spec = EmitFamily(chain, group, v, n);
        // A kernel whose static grid no launch takes is refused as a size
        // limit (UNIMPLEMENTED naming its op), as the tuner's seed skips it.
        if (!spec.ok() && spec.status().code() == absl::StatusCode::kUnimplemented &&
            absl::StrContains(spec.status().message(), "past a grid's")) {
          FUZZ_CHECK(n == Numerics::kFast, spec.status() << "\n" << ToString(chain));
          if (&v == &variants.front()) every_group = false;
          break;
        }
        FUZZ_CHECK(spec.ok(), spec.status() << "\n" << ToString(chain));
        CheckSpec(*spec, chain, group, partition->intermediates, partition->kernels.size() == 1,
                  client);
        if (&v == &variants.front() && n == Numerics::kFast) {
          std::set<uint32_t> mine;
          for (const KernelParam& p : spec->params) {
            if (p.kind == KernelParam::Kind::kBuffer && p.buffer.kind == BufferRef::Kind::kOutput)
              mine.insert(p.buffer.index);
          }
          for (uint32_t j : mine) ++writers[j];
        }
        specs.push_back(*std::move(spec));
      }
    }
  }
  // A plan writes every output, each in one kernel.
  for (size_t j = 0; every_group && j < writers.size(); ++j) {
    FUZZ_CHECK(writers[j] == 1, "outputs[" << j << "] is written by " << writers[j] << " kernels\n" << ToString(chain));
  }
  return specs;
}

}  // namespace kfuse::fuzz
