// Element types shared by the IR, the generators and the launch contract.
#ifndef KFUSE_CORE_DTYPE_H_
#define KFUSE_CORE_DTYPE_H_

#include <cstdint>
#include <string_view>

namespace kfuse {

// Values match kfuse.v1.DType so conversions are a cast after validation.
enum class DType : uint8_t {
  kInvalid = 0,
  kF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kI32 = 4,
  kBool = 5,
  kI64 = 6,
  kF64 = 7,
};

int DTypeBytes(DType t);
bool IsFloat(DType t);
// "f32", "bf16", ...: for messages and keys.
std::string_view DTypeName(DType t);
// The CUDA C++ storage type the generators emit ("float", "__kf_bf16", ...).
std::string_view DTypeStorage(DType t);
// PyTorch's promotion of two tensor operands (no scalars involved).
DType Promote(DType a, DType b);

}  // namespace kfuse

#endif  // KFUSE_CORE_DTYPE_H_
