#include "core/expr.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kfuse {

SizeExpr SizeExpr::Const(int64_t v) { return SizeExpr(Kind::kConst, v, nullptr, nullptr); }
SizeExpr SizeExpr::Symbol(uint32_t i) { return SizeExpr(Kind::kSymbol, i, nullptr, nullptr); }

SizeExpr SizeExpr::Binary(Kind kind, SizeExpr a, SizeExpr b) {
  // Fold constants so heuristic grids over static shapes stay plain numbers.
  if (a.is_const() && b.is_const()) {
    int64_t v = 0;
    int64_t x = a.value(), y = b.value();
    switch (kind) {
      case Kind::kAdd: v = x + y; break;
      case Kind::kSub: v = x - y; break;
      case Kind::kMul: v = x * y; break;
      case Kind::kCeilDiv:
        if (y == 0) goto keep;
        v = (x + y - 1) / y;
        break;
      case Kind::kMin: v = x < y ? x : y; break;
      case Kind::kMax: v = x > y ? x : y; break;
      default: goto keep;
    }
    return Const(v);
  }
  if (kind == Kind::kMul && b.is_const() && b.value() == 1) return a;
  if (kind == Kind::kMul && a.is_const() && a.value() == 1) return b;
  if (kind == Kind::kCeilDiv && b.is_const() && b.value() == 1) return a;
keep:
  return SizeExpr(kind, 0, std::make_shared<const SizeExpr>(std::move(a)),
                  std::make_shared<const SizeExpr>(std::move(b)));
}

SizeExpr SizeExpr::Add(SizeExpr a, SizeExpr b) { return Binary(Kind::kAdd, std::move(a), std::move(b)); }
SizeExpr SizeExpr::Sub(SizeExpr a, SizeExpr b) { return Binary(Kind::kSub, std::move(a), std::move(b)); }
SizeExpr SizeExpr::Mul(SizeExpr a, SizeExpr b) { return Binary(Kind::kMul, std::move(a), std::move(b)); }
SizeExpr SizeExpr::CeilDiv(SizeExpr a, SizeExpr b) { return Binary(Kind::kCeilDiv, std::move(a), std::move(b)); }
SizeExpr SizeExpr::Min(SizeExpr a, SizeExpr b) { return Binary(Kind::kMin, std::move(a), std::move(b)); }
SizeExpr SizeExpr::Max(SizeExpr a, SizeExpr b) { return Binary(Kind::kMax, std::move(a), std::move(b)); }

absl::StatusOr<int64_t> SizeExpr::Eval(absl::Span<const int64_t> symbols) const {
  switch (kind_) {
    case Kind::kConst: return value_;
    case Kind::kSymbol:
      if (value_ < 0 || static_cast<size_t>(value_) >= symbols.size())
        return absl::InvalidArgumentError(absl::StrCat("size expression uses unbound symbol s", value_));
      return symbols[value_];
    default: break;
  }
  auto a = lhs_->Eval(symbols);
  if (!a.ok()) return a.status();
  auto b = rhs_->Eval(symbols);
  if (!b.ok()) return b.status();
  int64_t x = *a, y = *b, r = 0;
  bool overflow = false;
  switch (kind_) {
    case Kind::kAdd: overflow = __builtin_add_overflow(x, y, &r); break;
    case Kind::kSub: overflow = __builtin_sub_overflow(x, y, &r); break;
    case Kind::kMul: overflow = __builtin_mul_overflow(x, y, &r); break;
    case Kind::kCeilDiv:
      if (y <= 0) return absl::InvalidArgumentError(absl::StrCat("ceil_div by ", y, " in ", ToString()));
      r = x / y + (x % y != 0 && x > 0 ? 1 : 0);
      break;
    case Kind::kMin: r = x < y ? x : y; break;
    case Kind::kMax: r = x > y ? x : y; break;
    default: break;
  }
  if (overflow) return absl::InvalidArgumentError(absl::StrCat("size expression overflows: ", ToString()));
  return r;
}

std::string SizeExpr::ToString() const {
  switch (kind_) {
    case Kind::kConst: return absl::StrCat(value_);
    case Kind::kSymbol: return absl::StrCat("s", value_);
    case Kind::kAdd: return absl::StrCat("(", lhs_->ToString(), " + ", rhs_->ToString(), ")");
    case Kind::kSub: return absl::StrCat("(", lhs_->ToString(), " - ", rhs_->ToString(), ")");
    case Kind::kMul: return absl::StrCat(lhs_->ToString(), " * ", rhs_->ToString());
    case Kind::kCeilDiv: return absl::StrCat("ceil_div(", lhs_->ToString(), ", ", rhs_->ToString(), ")");
    case Kind::kMin: return absl::StrCat("min(", lhs_->ToString(), ", ", rhs_->ToString(), ")");
    case Kind::kMax: return absl::StrCat("max(", lhs_->ToString(), ", ", rhs_->ToString(), ")");
  }
  return "?";
}

bool operator==(const SizeExpr& a, const SizeExpr& b) {
  if (a.kind_ != b.kind_ || a.value_ != b.value_) return false;
  if (!a.lhs_) return true;
  return *a.lhs_ == *b.lhs_ && *a.rhs_ == *b.rhs_;
}

}  // namespace kfuse
