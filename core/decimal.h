// A double in the fewest significant digits (6 to 17) that read back as the
// same value: 0.1 as "0.1", 3600.0001 as "3600.0001" where StrCat's six
// digits would print "3600", so a message never calls a value what it is not.
#ifndef KFUSE_CORE_DECIMAL_H_
#define KFUSE_CORE_DECIMAL_H_

#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"

namespace kfuse {

inline std::string ShortestDecimal(double v) {
  for (int digits = 6; digits < 17; ++digits) {
    const std::string s = absl::StrFormat("%.*g", digits, v);
    if (std::strtod(s.c_str(), nullptr) == v) return s;
  }
  return absl::StrFormat("%.17g", v);
}

}  // namespace kfuse

#endif  // KFUSE_CORE_DECIMAL_H_
