// Static figures of a chain for the roofline, the references and the tuner:
// the work a kernel must do, the domain to draw each input from, and the
// symbol values to tune at.
//
//   std::vector<int64_t> sizes = SymbolValuesForTuning(chain);
//   RooflineReport r = Roofline(AnalyzeWork(chain, group.nodes, sizes), ceilings);
#ifndef KFUSE_CODEGEN_ANALYSIS_H_
#define KFUSE_CODEGEN_ANALYSIS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "codegen/ir.h"
#include "core/roofline.h"

namespace kfuse {

// The fewest bytes and the FLOPs (by kind, see the table in analysis.cc) of
// the kernel computing `nodes` of validated `c` (all nodes when empty), with
// symbol i at symbol_values[i]. Bytes: each chain input the kernel reads,
// once and whole (one read through slices alone: as far as they reach),
// plus each chain output it writes (one per output entry). Intermediates
// inside the kernel cost nothing.
Work AnalyzeWork(const Chain& c, const std::vector<int32_t>& nodes,
                 absl::Span<const int64_t> symbol_values);

// Elements of a type with symbol i at symbol_values[i] (missing: 1).
double Elements(const TensorType& t, absl::Span<const int64_t> symbol_values);

// Elements a chain input's buffer spans: its elements where it is dense,
// else one past its last element's offset at its strides (a padded row's
// gaps counted).
double BufferElements(const Node& input, absl::Span<const int64_t> symbol_values);

enum class Domain {
  kAny,       // Any finite value.
  kPositive,  // Strictly positive: it reaches log, sqrt, a divisor, ...
  kUnit,      // In (0, 1). Reserved: no op needs it yet.
};

// Per node: kPositive when it flows (through sign-preserving ops:
// arithmetic, casts, views, reductions, where's values) into log, log2,
// sqrt, rsqrt, reciprocal, a pow base or a div denominator, so references
// draw values where the function is defined. A plan's intermediate that a
// later kernel reads as its input is drawn from its node's domain.
std::vector<Domain> NodeDomains(const Chain& c);
// NodeDomains of the chain's inputs, in input order.
std::vector<Domain> InputDomains(const Chain& c);

// Where an integer picks a position along an axis: compared for equality
// (through casts and views) with an iota, as a class label is in a
// cross-entropy. The check draws such a node in [0, extent) (the iota's
// axis at the symbol values), and one value in 16 `other`: a constant the
// node is also compared with (an ignore_index), or -1 (no class) without one.
// extent 0: not an index.
struct IndexDomain {
  int64_t extent = 0;
  int64_t other = -1;
  friend bool operator==(const IndexDomain& a, const IndexDomain& b) {
    return a.extent == b.extent && a.other == b.other;
  }
};
std::vector<IndexDomain> NodeIndexDomains(const Chain& c, absl::Span<const int64_t> symbol_values);

// Per symbol of validated `c`: its hint rounded up to a power of two (the
// shape bucket), or 1 << 20 without a hint, clamped to the symbol's max when
// it has one; then, where a tensor of the chain (an intermediate too) would
// pass Limits::max_elements there, or a strided input's buffer would span
// more, its symbols without a hint are halved first, then its largest (for
// a span, only those its strides step over: not a stride 0's), until it
// fits.
std::vector<int64_t> SymbolValuesForTuning(const Chain& c);

// The other symbol values a kernel tuned at `tuned` (SymbolValuesForTuning's)
// is checked at before it is chosen, since it serves every size: each symbol
// at an odd size near three quarters of its bucket (edge tiles, vector
// tails, a partial last wave), then each at most 3 (a launch of a row or
// two). Only vectors that differ from `tuned`, without repeats; none when
// the chain has no symbols.
std::vector<std::vector<int64_t>> SymbolValuesForCheck(absl::Span<const int64_t> tuned);

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_ANALYSIS_H_
