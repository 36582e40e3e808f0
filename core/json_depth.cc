#include "core/json_depth.h"

#include "absl/strings/str_cat.h"

namespace kfuse {

absl::Status CheckJsonDepth(absl::string_view text, absl::string_view what, int max_depth) {
  int depth = 0;
  char quote = 0;  // The quote that opened the string the scan is in, or 0.
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quote != 0) {
      if (c == '\\') {
        ++i;  // The escaped character, a quote or a backslash included.
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    // protobuf's parser takes single-quoted strings too.
    if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": JSON nested more than ", max_depth,
                                                       " levels deep (at byte ", i, "); no kfuse file nests so"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace kfuse
