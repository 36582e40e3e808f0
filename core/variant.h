// How a kernel computes: a family and its named tuning parameters. Two
// variants of one chain compute the same function; the tuner picks among them.
//
//   Variant v{Family::kPointwise, {{"block", 256}, {"vec", 4}}};
//   v.Get("vec");   // 4
#ifndef KFUSE_CORE_VARIANT_H_
#define KFUSE_CORE_VARIANT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace kfuse {

// Values match kfuse.v1.Family.
enum class Family : uint8_t {
  kInvalid = 0,
  kPointwise = 1,
  kRowReduction = 2,
  kMatmul = 3,
  kAttention = 4,
  kReduction = 5,  // Reductions over outer axes (codegen/reduce.h).
};

std::string_view FamilyName(Family f);
// The family FamilyName(f) names; kInvalid for any other text.
Family FamilyFromName(std::string_view name);

struct Variant {
  Family family = Family::kInvalid;
  // Ordered, so printing and hashing are stable.
  std::map<std::string, int64_t> params;

  int64_t Get(std::string_view name, int64_t fallback = 0) const;
  // "pointwise{block=256,vec=4}".
  std::string ToString() const;

  friend bool operator==(const Variant& a, const Variant& b) {
    return a.family == b.family && a.params == b.params;
  }
  friend bool operator!=(const Variant& a, const Variant& b) { return !(a == b); }
  friend bool operator<(const Variant& a, const Variant& b) {
    return a.family != b.family ? a.family < b.family : a.params < b.params;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Variant& v) {
    return H::combine(std::move(h), v.family, v.params);
  }
};

}  // namespace kfuse

#endif  // KFUSE_CORE_VARIANT_H_
