// The one door from the wire to the IR: translates a kfuse.v1.Chain into a
// typed, validated Chain, rejecting bad input with InvalidArgument naming the
// wire field ("ops[3].args[1]: op 5 is not before op 3").
//
//   KFUSE_ASSIGN_OR_RETURN(Chain typed, TranslateChain(request.chain()));
//   Chain canonical = Canonicalize(typed);
#ifndef KFUSE_SERVICE_TRANSLATE_H_
#define KFUSE_SERVICE_TRANSLATE_H_

#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "codegen/validate.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

// Structural translation (inputs become nodes 0..n-1, op j becomes node
// n + j with wire_index j, symbols interned by name with their hint and max),
// then Validate(). Requests over `limits` are refused before anything is
// built, so the work is linear in the request's size.
absl::StatusOr<Chain> TranslateChain(const kfuse::v1::Chain& proto, const Limits& limits = {});

}  // namespace kfuse

#endif  // KFUSE_SERVICE_TRANSLATE_H_
