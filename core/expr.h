// Integer expressions over runtime sizes: grid dims, scalars, workspace sizes
// and preconditions in the launch contract are written in them, and every
// launcher (C++, Python) evaluates them the same way.
//
//   SizeExpr grid = SizeExpr::CeilDiv(SizeExpr::Symbol(0), SizeExpr::Const(256));
//   int64_t g = grid.Eval({1 << 20}).value();   // 4096
#ifndef KFUSE_CORE_EXPR_H_
#define KFUSE_CORE_EXPR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kfuse {

class SizeExpr {
 public:
  enum class Kind : uint8_t { kConst, kSymbol, kAdd, kSub, kMul, kCeilDiv, kMin, kMax };

  SizeExpr() : SizeExpr(Const(0)) {}
  static SizeExpr Const(int64_t v);
  static SizeExpr Symbol(uint32_t index);
  static SizeExpr Add(SizeExpr a, SizeExpr b);
  static SizeExpr Sub(SizeExpr a, SizeExpr b);
  static SizeExpr Mul(SizeExpr a, SizeExpr b);
  static SizeExpr CeilDiv(SizeExpr a, SizeExpr b);
  static SizeExpr Min(SizeExpr a, SizeExpr b);
  static SizeExpr Max(SizeExpr a, SizeExpr b);

  Kind kind() const { return kind_; }
  int64_t value() const { return value_; }        // kConst: the value; kSymbol: index.
  const SizeExpr& lhs() const { return *lhs_; }   // Binary kinds only.
  const SizeExpr& rhs() const { return *rhs_; }
  bool is_const() const { return kind_ == Kind::kConst; }

  // Evaluates with symbol i bound to symbols[i]. Errors on an unbound symbol,
  // a division by zero or overflow of int64.
  absl::StatusOr<int64_t> Eval(absl::Span<const int64_t> symbols) const;
  // "ceil_div(s0, 256)": for messages, golden tests and docs.
  std::string ToString() const;

  friend bool operator==(const SizeExpr& a, const SizeExpr& b);
  friend bool operator!=(const SizeExpr& a, const SizeExpr& b) { return !(a == b); }

 private:
  SizeExpr(Kind kind, int64_t value, std::shared_ptr<const SizeExpr> lhs,
           std::shared_ptr<const SizeExpr> rhs)
      : kind_(kind), value_(value), lhs_(std::move(lhs)), rhs_(std::move(rhs)) {}
  static SizeExpr Binary(Kind kind, SizeExpr a, SizeExpr b);

  Kind kind_;
  int64_t value_;
  // Immutable and shared: copies are cheap and values never alias mutably.
  std::shared_ptr<const SizeExpr> lhs_, rhs_;
};

struct Dim3Expr {
  SizeExpr x = SizeExpr::Const(1), y = SizeExpr::Const(1), z = SizeExpr::Const(1);
  friend bool operator==(const Dim3Expr& a, const Dim3Expr& b) {
    return a.x == b.x && a.y == b.y && a.z == b.z;
  }
};

}  // namespace kfuse

#endif  // KFUSE_CORE_EXPR_H_
