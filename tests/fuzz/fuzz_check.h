// The fuzz targets' invariant check: a violated invariant is a finding, so
// it prints what broke and traps (libFuzzer saves the input as a crash).
//
//   FUZZ_CHECK(again.ok(), "canonical chain no longer validates: " << again.status());
#ifndef KFUSE_TESTS_FUZZ_FUZZ_CHECK_H_
#define KFUSE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <iostream>

#include "absl/status/status.h"

#define FUZZ_CHECK(cond, msg)                                                   \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::cerr << __FILE__ << ":" << __LINE__ << ": fuzz invariant " #cond     \
                << " failed: " << msg << std::endl;                             \
      __builtin_trap();                                                         \
    }                                                                           \
  } while (0)

namespace kfuse::fuzz {

// Client input may be refused only as invalid or not implemented, with a
// message the client can act on.
inline bool IsClientError(const absl::Status& s) {
  return (s.code() == absl::StatusCode::kInvalidArgument ||
          s.code() == absl::StatusCode::kUnimplemented) &&
         !s.message().empty();
}

}  // namespace kfuse::fuzz

#endif  // KFUSE_TESTS_FUZZ_FUZZ_CHECK_H_
