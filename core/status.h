// The one pair of error-propagation macros, and KFUSE_CHECK for our own bugs.
//
// Bad input, NVRTC, the driver and SQLite return absl::Status; a broken
// invariant of our own aborts with file and line (KFUSE_CHECK). We throw no
// exceptions; CatchingBugs answers one a library call throws on a bug of ours.
#ifndef KFUSE_CORE_STATUS_H_
#define KFUSE_CORE_STATUS_H_

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define KFUSE_STATUS_CONCAT_INNER_(a, b) a##b
#define KFUSE_STATUS_CONCAT_(a, b) KFUSE_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` is not OK.
#define KFUSE_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::absl::Status kfuse_status_ = (expr);         \
    if (!kfuse_status_.ok()) return kfuse_status_; \
  } while (0)

// KFUSE_ASSIGN_OR_RETURN(auto x, MakeX()); assigns or returns the error.
#define KFUSE_ASSIGN_OR_RETURN(lhs, expr) \
  KFUSE_ASSIGN_OR_RETURN_IMPL_(           \
      KFUSE_STATUS_CONCAT_(kfuse_statusor_, __LINE__), lhs, expr)
#define KFUSE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

// Our own bugs: abort with file and line. Never for bad input.
#define KFUSE_CHECK(cond)                                                 \
  do {                                                                    \
    if (!(cond)) {                                                        \
      std::fprintf(stderr, "%s:%d: KFUSE_CHECK failed: %s\n", __FILE__,   \
                   __LINE__, #cond);                                      \
      std::abort();                                                       \
    }                                                                     \
  } while (0)

namespace kfuse {

// f() (returning absl::Status or absl::StatusOr), with an exception it
// throws (std::map::at on a bug of ours, say) as INTERNAL naming `what` and
// the exception. For work on a client's input in a request's handler: gRPC
// answers a callback handler's exception as an UNIMPLEMENTED without a
// message, which no caller can tell from an op not yet generated.
template <typename F>
auto CatchingBugs(absl::string_view what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, " met a bug of ours: ", e.what()));
  }
}

}  // namespace kfuse

#endif  // KFUSE_CORE_STATUS_H_
