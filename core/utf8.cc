#include "core/utf8.h"

namespace kfuse {

size_t Utf8SequenceLength(absl::string_view s) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto cont = [&](size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  unsigned char b = byte(0);
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return cont(1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (b == 0xE0 && byte(1) < 0xA0) return 0;   // Overlong.
    if (b == 0xED && byte(1) >= 0xA0) return 0;  // Surrogate.
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (b == 0xF0 && byte(1) < 0x90) return 0;   // Overlong.
    if (b == 0xF4 && byte(1) >= 0x90) return 0;  // Past U+10FFFF.
    return 4;
  }
  return 0;
}

bool IsUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceLength(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace kfuse
