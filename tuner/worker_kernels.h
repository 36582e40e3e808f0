// The worker's own GPU helpers, so a 128M-element task never crosses PCIe
// or loops on the host: random inputs made on the GPU (the same bytes as
// RandomInput), the reference/eager preparation, and the comparison of an
// output against the float64 reference reduced to a few KB of per-block
// partials. Compiled once per worker process by NVRTC (worker_nvrtc.h) for
// the device's arch; the element logic is tuner/worker_shared_code.h.
//
//   KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<WorkerKernels> k, WorkerKernels::Create("sm_90a"));
//   KFUSE_RETURN_IF_ERROR(k->FillRandom(buf, spec, seed, /*index=*/0, stream));
//   KFUSE_ASSIGN_OR_RETURN(CompareStats s, k->Compare(out, DType::kBF16, ref, n, stream));
#ifndef KFUSE_TUNER_WORKER_KERNELS_H_
#define KFUSE_TUNER_WORKER_KERNELS_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tuner/check.h"
#include "tuner/runner.h"
#include "tuner/worker_buffers.h"
#include "tuner/worker_shared_code.h"

namespace kfuse {

// Threads per block of every helper kernel (their reductions assume it).
inline constexpr int kHelperBlock = 256;
// At most this many blocks (grid-stride beyond), so partials stay <= 64 KB.
inline constexpr int kHelperMaxBlocks = 1024;

// Blocks a helper launch over n elements uses: ceil(n / 256), 1..1024.
int HelperBlocks(int64_t n);

// The full NVRTC source: device prelude, shared element code, and the
// kernels kf_rand, kf_cmp, kf_prep, kf_widen (dtype and element size are
// arguments).
// Exposed for a compile test without a GPU.
const std::string& WorkerKernelSource();

// Host reductions of the per-block partials (order-free).
CompareStats ReduceCompareParts(absl::Span<const shared_code::KfPart> parts);
PrepStats ReducePrepParts(absl::Span<const shared_code::KfPrep> parts);

class WorkerKernels {
 public:
  // Compiles and loads into the current context; Internal with NVRTC's log
  // when it does not compile (a kfuse bug: the compile test covers it).
  static absl::StatusOr<std::unique_ptr<WorkerKernels>> Create(const std::string& arch);
  ~WorkerKernels();
  WorkerKernels(const WorkerKernels&) = delete;
  WorkerKernels& operator=(const WorkerKernels&) = delete;

  // Enqueues on `stream`: `buf` (spec.elements of spec.dtype) gets input
  // `index` of a task seeded `seed`, byte for byte RandomInput(spec, seed, index).
  absl::Status FillRandom(const DeviceBuffer& buf, const BufferSpec& spec, uint64_t seed,
                          uint64_t index, CUstream stream) const;

  // Enqueues on `stream`: `out` gets the n elements of `in` (dtype) as
  // double, as kf_decode reads them (an intermediate input for the float64
  // reference, which reads intermediates as double).
  absl::Status Widen(const DeviceBuffer& in, DType dtype, int64_t n, const DeviceBuffer& out,
                     CUstream stream) const;

  // `n` elements of `got` (dtype) against the f64 reference `ref`: what
  // CompareToReference and CountUnwritten compute on the host. Runs on
  // `stream`, then synchronizes it; a fault is a sticky CUDA error.
  absl::StatusOr<CompareStats> Compare(CUdeviceptr got, DType dtype, CUdeviceptr ref, int64_t n,
                                       CUstream stream) const;

  // Before any candidate: counts unwritten reference (all-0xFF f64) and
  // eager elements, and adjusts `ref` in place where eager's NaN/inf differ
  // (PrepareReference on the host). Synchronizes `stream`.
  absl::StatusOr<PrepStats> Prepare(CUdeviceptr ref, CUdeviceptr eager, DType eager_dtype,
                                    int64_t n, CUstream stream) const;

 private:
  WorkerKernels() = default;

  CUmodule module_ = nullptr;
  CUfunction rand_ = nullptr, cmp_ = nullptr, prep_ = nullptr, widen_ = nullptr;
  DeviceBuffer parts_;  // kHelperMaxBlocks x 64 bytes.
};

// One element of `buf` (dtype) as double, downloaded; for failure messages.
absl::StatusOr<double> ElementAt(CUdeviceptr buf, DType dtype, int64_t i);

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_KERNELS_H_
