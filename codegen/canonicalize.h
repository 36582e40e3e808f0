// One chain, one key: Canonicalize() gives equivalent chains the same node
// list and ChainHash() turns it into the store's chain key.
//
//   Chain canonical = Canonicalize(*Validate(raw));
//   std::string key = ChainHash(canonical);   // 64 hex digits
//
// Equivalent here means: they differ only by dead ops, duplicated
// subexpressions, the operand order of commutative ops, the order of
// independent ops, exactly foldable constant arithmetic, or client names.
// One lowering happens here too, so that every later stage sees it: a
// reduction over the innermost axis and outer axes together becomes one
// along rows, then one over the other axes of its per-row results.
#ifndef KFUSE_CODEGEN_CANONICALIZE_H_
#define KFUSE_CODEGEN_CANONICALIZE_H_

#include <string>

#include "codegen/ir.h"

namespace kfuse {

// For a validated chain. Inputs keep their positions (all of them, used or
// not: they are the launch contract); ops not reaching an output are dropped;
// equal subexpressions are merged (same kind, attributes and operands);
// commutative operands (add, mul, maximum, minimum, eq, ne, logical_and,
// logical_or) are ordered by a structural hash; element-wise ops on constants
// are folded only when the result is exact in its dtype; casts are kept; a
// reduction over the innermost and outer axes is split into one along rows
// and one over the rest (again while the rest is mixed), f16/bf16 sums and
// means in f32 between them and cast back once, as eager PyTorch accumulates
// them, every new node carrying the reduction's wire index.
// Node ids follow a post-order walk from the outputs in order; symbols are
// renumbered by first use (unused ones dropped), names kept; outputs keep
// their order (two may name one node). The result validates unchanged.
Chain Canonicalize(const Chain& validated);

// Hex sha256 of a versioned serialisation of a canonical chain: kinds, the
// attributes each kind reads, dtypes, shapes, strides, which dims share a
// symbol and each symbol's max (it changes index width), constants as bit
// patterns. Excludes client names and symbol hints (the hint only picks the
// tuning bucket, which the cache key's spec carries).
std::string ChainHash(const Chain& canonical);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_CANONICALIZE_H_
