// CUDA C++ building blocks of the tensor-core kernels (matmul, attention),
// written before a kernel that defines kf_THREADS (threads per block):
//
//   text = absl::StrCat(prelude, "constexpr int kf_THREADS = 128;\n",
//                       kTensorCoreBlocks, kernel);
//
// kf_cp16 / kf_cp_commit / kf_cp_wait<N>: cp.async of 16 bytes (zero-filled
// past `bytes`) and its groups. kf_ldm4 / kf_ldm4t: ldmatrix x4 (.trans).
// kf_mma: mma.sync m16n8k16 with f32 accumulators; the operand type is the
// KF_AB macro ("bf16" or "f16"). kf_swz<COLS>: the element offset of (row,
// col) in a tile of rows of COLS 16-bit elements whose 16-byte chunks are
// XOR-swizzled, so the eight rows an ldmatrix reads at one logical chunk
// fall in different bank groups. kf_load_tile<ROWS, COLS>: a tile from
// global memory into such a swizzled tile, zero-filling past the edges.
// kf_pair<T>: two elements stored in one access.
#ifndef KFUSE_CODEGEN_TENSOR_CORE_H_
#define KFUSE_CODEGEN_TENSOR_CORE_H_

namespace kfuse {

extern const char kTensorCoreBlocks[];

}  // namespace kfuse

#endif  // KFUSE_CODEGEN_TENSOR_CORE_H_
