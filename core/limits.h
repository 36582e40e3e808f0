// Limits of the wire API that the server enforces and clients check before
// they send, so that both say the same.
#ifndef KFUSE_CORE_LIMITS_H_
#define KFUSE_CORE_LIMITS_H_

namespace kfuse {

// The most tuning time a request may ask for (TuningPolicy.budget_seconds):
// a typo (1e308) must not hold a GPU for ever.
inline constexpr double kMaxBudgetSeconds = 3600;

}  // namespace kfuse

#endif  // KFUSE_CORE_LIMITS_H_
