// Monotonic seconds (steady_clock): for intervals, backoffs and expiry, where
// wall-clock steps must not count. The default clock of what lets tests
// inject one.
#ifndef KFUSE_CORE_CLOCK_H_
#define KFUSE_CORE_CLOCK_H_

#include <chrono>

namespace kfuse {

inline double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace kfuse

#endif  // KFUSE_CORE_CLOCK_H_
