#include "core/dtype.h"

#include "core/status.h"

namespace kfuse {

int DTypeBytes(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kI32: return 4;
    case DType::kBool: return 1;
    case DType::kI64: return 8;
    case DType::kF64: return 8;
    case DType::kInvalid: break;
  }
  KFUSE_CHECK(false);
  return 0;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 ||
         t == DType::kF64;
}

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kI32: return "i32";
    case DType::kBool: return "bool";
    case DType::kI64: return "i64";
    case DType::kF64: return "f64";
    case DType::kInvalid: break;
  }
  return "invalid";
}

std::string_view DTypeStorage(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF16: return "__kf_half";
    case DType::kBF16: return "__kf_bf16";
    case DType::kI32: return "int";
    case DType::kBool: return "unsigned char";
    case DType::kI64: return "long long";
    case DType::kF64: return "double";
    case DType::kInvalid: break;
  }
  KFUSE_CHECK(false);
  return "";
}

namespace {
// PyTorch's category order: bool < integer < floating.
int Category(DType t) {
  if (t == DType::kBool) return 0;
  if (IsFloat(t)) return 2;
  return 1;
}
}  // namespace

DType Promote(DType a, DType b) {
  if (a == b) return a;
  int ca = Category(a), cb = Category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 1) return DTypeBytes(a) >= DTypeBytes(b) ? a : b;
  // Floating: f16 with bf16 promotes to f32, as in PyTorch.
  if (DTypeBytes(a) != DTypeBytes(b)) return DTypeBytes(a) > DTypeBytes(b) ? a : b;
  return DType::kF32;
}

}  // namespace kfuse
