// A bound on how deeply JSON text nests, checked before it is parsed:
// protobuf's JSON parser takes time that grows with the square of the
// nesting depth (a 40 KB file nested 20000 deep took 12 s), so text read
// from a file is refused at once past a depth no kfuse document comes near.
//
//   KFUSE_RETURN_IF_ERROR(CheckJsonDepth(text, "chain.json"));
#ifndef KFUSE_CORE_JSON_DEPTH_H_
#define KFUSE_CORE_JSON_DEPTH_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kfuse {

// Deeper than any chain, plan or bundle file (a chain nests about 6 deep).
inline constexpr int kMaxJsonDepth = 100;

// InvalidArgument naming `what` when `text` opens more than `max_depth`
// arrays and objects inside one another (brackets inside strings do not
// count); OK otherwise, malformed text included: the parser words that.
absl::Status CheckJsonDepth(absl::string_view text, absl::string_view what, int max_depth = kMaxJsonDepth);

}  // namespace kfuse

#endif  // KFUSE_CORE_JSON_DEPTH_H_
