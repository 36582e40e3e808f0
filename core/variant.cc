#include "core/variant.h"

#include "absl/strings/str_cat.h"

namespace kfuse {

std::string_view FamilyName(Family f) {
  switch (f) {
    case Family::kPointwise: return "pointwise";
    case Family::kRowReduction: return "row_reduction";
    case Family::kMatmul: return "matmul";
    case Family::kAttention: return "attention";
    case Family::kReduction: return "reduction";
    case Family::kInvalid: break;
  }
  return "invalid";
}

Family FamilyFromName(std::string_view name) {
  for (Family f : {Family::kPointwise, Family::kRowReduction, Family::kMatmul, Family::kAttention,
                   Family::kReduction}) {
    if (FamilyName(f) == name) return f;
  }
  return Family::kInvalid;
}

int64_t Variant::Get(std::string_view name, int64_t fallback) const {
  auto it = params.find(std::string(name));
  return it == params.end() ? fallback : it->second;
}

std::string Variant::ToString() const {
  std::string s = absl::StrCat(std::string(FamilyName(family)), "{");
  bool first = true;
  for (const auto& [k, v] : params) {
    absl::StrAppend(&s, first ? "" : ",", k, "=", v);
    first = false;
  }
  return s + "}";
}

}  // namespace kfuse
