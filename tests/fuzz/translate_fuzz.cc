// Fuzzes the wire-to-IR door: TranslateChain (and Validate inside it), then
// Canonicalize and ChainHash on what it accepts. Inputs are serialised
// kfuse.v1.Chain messages; the custom mutator changes them structurally (and
// sometimes byte-wise, so the proto parser is exercised too).
//
// Invariants (a violation traps): refusals are InvalidArgument or
// Unimplemented with a message; the canonical chain validates unchanged;
// canonicalising it again changes neither it nor its hash; renaming every
// client string (inputs, outputs, symbols) changes neither the outcome nor
// the hash.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "codegen/canonicalize.h"
#include "codegen/ir.h"
#include "codegen/validate.h"
#include "kfuse/v1/kfuse.pb.h"
#include "service/translate.h"
#include "tests/fuzz/chain_mutator.h"
#include "tests/fuzz/chain_target.h"
#include "tests/fuzz/fuzz_check.h"

namespace kfuse::fuzz {
namespace {

// The same chain with every client string replaced by a positional name;
// symbols map consistently so which dims share one is kept.
v1::Chain Renamed(v1::Chain c) {
  std::map<std::string, std::string> symbols;
  auto rename = [&](v1::Dim& d) {
    if (d.kind_case() != v1::Dim::kSymbol || d.symbol().empty()) return;
    auto [it, inserted] = symbols.emplace(d.symbol(), "");
    if (inserted) it->second = "r" + std::to_string(symbols.size());
    d.set_symbol(it->second);
  };
  int k = 0;
  for (v1::TensorSpec& in : *c.mutable_inputs()) {
    in.set_name("i" + std::to_string(k++));
    for (v1::Dim& d : *in.mutable_shape()) rename(d);
  }
  for (v1::Op& op : *c.mutable_ops()) {
    if (!op.has_shape()) continue;  // Not set where it was not: a stray shape is refused.
    for (v1::Dim& d : *op.mutable_shape()->mutable_shape()) rename(d);
  }
  k = 0;
  for (v1::Output& o : *c.mutable_outputs()) o.set_name("o" + std::to_string(k++));
  return c;
}

// Whether two inputs, or two outputs, share a non-empty name: refused, and
// Renamed's distinct positional names would not be.
bool RepeatsAName(const v1::Chain& c) {
  std::set<std::string> inputs, outputs;
  for (const v1::TensorSpec& in : c.inputs())
    if (!in.name().empty() && !inputs.insert(in.name()).second) return true;
  for (const v1::Output& o : c.outputs())
    if (!o.name().empty() && !outputs.insert(o.name()).second) return true;
  return false;
}

void Check(const v1::Chain& proto) {
  absl::StatusOr<Chain> typed = TranslateChain(proto);
  if (RepeatsAName(proto)) {
    FUZZ_CHECK(!typed.ok() && IsClientError(typed.status()), typed.status());
    return;
  }
  absl::StatusOr<Chain> renamed = TranslateChain(Renamed(proto));
  FUZZ_CHECK(typed.status().code() == renamed.status().code(),
             typed.status() << " vs renamed " << renamed.status());
  if (!typed.ok()) {
    FUZZ_CHECK(IsClientError(typed.status()), typed.status());
    return;
  }
  Chain canonical = Canonicalize(*typed);
  std::string hash = ChainHash(canonical);
  FUZZ_CHECK(hash.size() == 64, hash);
  FUZZ_CHECK(ChainHash(Canonicalize(*renamed)) == hash, "client names changed the hash\n"
                                                            << ToString(canonical));

  absl::StatusOr<Chain> again = Validate(canonical);
  FUZZ_CHECK(again.ok(), again.status() << "\n" << ToString(canonical));
  FUZZ_CHECK(ToString(*again) == ToString(canonical),
             "validation changed the canonical chain\n" << ToString(canonical) << "---\n"
                                                        << ToString(*again));
  Chain twice = Canonicalize(*again);
  FUZZ_CHECK(ToString(twice) == ToString(canonical),
             "not idempotent\n" << ToString(canonical) << "---\n" << ToString(twice));
  FUZZ_CHECK(ChainHash(twice) == hash, "hash not idempotent\n" << ToString(canonical));
}

}  // namespace
}  // namespace kfuse::fuzz

KFUSE_CHAIN_FUZZ_TARGET([](const kfuse::v1::Chain& proto, uint64_t) { kfuse::fuzz::Check(proto); })
