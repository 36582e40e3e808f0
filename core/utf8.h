// UTF-8 well-formedness, as protobuf's string fields and JSON need it: no
// stray bytes, overlong forms, surrogates or code points past U+10FFFF.
#ifndef KFUSE_CORE_UTF8_H_
#define KFUSE_CORE_UTF8_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace kfuse {

// The length of the well-formed UTF-8 sequence at the start of `s`, or 0
// when it is not one (a stray byte, an overlong form, a surrogate).
size_t Utf8SequenceLength(absl::string_view s);

// Whether all of `s` is well-formed UTF-8.
bool IsUtf8(absl::string_view s);

}  // namespace kfuse

#endif  // KFUSE_CORE_UTF8_H_
