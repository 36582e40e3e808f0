#include "clients/verify.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace kfuse {

absl::Status VerifyPlan(const v1::KernelPlan& plan, const PublicKey& pinned) {
  return VerifyPlanSignature(plan, pinned);
}

absl::StatusOr<PublicKey> LoadPinnedKey(const std::string& file_or_hex) {
  std::string trimmed(absl::StripAsciiWhitespace(file_or_hex));
  absl::StatusOr<PublicKey> direct = ParsePublicKeyHex(trimmed);
  if (direct.ok()) return direct;
  std::ifstream in(file_or_hex);
  if (!in) {
    // Digits are not echoed: a mistyped key may be a private seed's, quoted,
    // prefixed (0x...) or grouped as configuration files write them. So an
    // argument with 16 or more hex digits in all is described, not shown
    // (a path of so many is rare; its length still says what was given).
    const size_t digits = static_cast<size_t>(std::count_if(trimmed.begin(), trimmed.end(), [](char ch) {
      return absl::ascii_isxdigit(static_cast<unsigned char>(ch));
    }));
    const std::string what = digits >= 16 ? absl::StrCat("of ", trimmed.size(), " characters (", digits,
                                                         " of them hex digits)")
                                          : absl::StrCat("'", file_or_hex, "'");
    return absl::NotFoundError(absl::StrCat("verify key ", what, " is neither 64 hex digits nor a readable file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<PublicKey> key = ParsePublicKeyHex(text.str());
  if (!key.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file_or_hex, ": ", key.status().message()));
  }
  return key;
}

}  // namespace kfuse
