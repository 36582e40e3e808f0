// Device buffers for a check task and the random data that fills its inputs,
// from a seed so a run can be repeated. The worker makes inputs on the GPU
// (WorkerKernels::FillRandom, the same bytes); RandomInput is the host
// definition, for tests and small uploads.
//
//   std::string bytes = RandomInput({DType::kBF16, 1024, InputDomain::kPositive}, seed, 0);
//   KFUSE_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Alloc(bytes.size()));
//   KFUSE_RETURN_IF_ERROR(b.Upload(bytes));
#ifndef KFUSE_TUNER_WORKER_BUFFERS_H_
#define KFUSE_TUNER_WORKER_BUFFERS_H_

#include <cuda.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "tuner/runner.h"

namespace kfuse {

// Host bytes for one input: kAny roughly normal (Irwin-Hall, sd 1, within
// +-3.47), kPositive uniform [0.1, 4), kUnit uniform [-1, 1); f16/bf16
// rounded from float; integers small (-8..8, 1..8 for kPositive, -1..1 for
// kUnit), or indices (BufferSpec::index_extent); bool 0/1; element 0 never zero. Counter-based
// (tuner/worker_shared_code.h): element i depends on (seed, stream, i) only.
// `stream` separates the inputs of one task (input index).
std::string RandomInput(const BufferSpec& spec, uint64_t seed, uint64_t stream);

// An owned device allocation in the current context.
class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Alloc(size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Synchronous; the data is on the device when it returns.
  absl::Status Upload(const std::string& host) const;
  // Synchronous, on the legacy stream: synchronize the stream that wrote
  // the buffer first.
  absl::StatusOr<std::string> Download() const;
  absl::Status CopyOut(size_t offset, void* dst, size_t bytes) const;
  // On the legacy stream, asynchronous to the host: only ordered with work
  // on blocking streams. Prefer FillAsync on the stream that uses the buffer.
  absl::Status Fill(unsigned char byte) const;
  absl::Status FillAsync(unsigned char byte, CUstream stream) const;

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_BUFFERS_H_
