#include "tuner/worker_buffers.h"

#include <cstring>

#include "core/status.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_shared_code.h"

namespace kfuse {

std::string RandomInput(const BufferSpec& spec, uint64_t seed, uint64_t stream) {
  const int bytes = DTypeBytes(spec.dtype);
  const int dt = static_cast<int>(spec.dtype);
  const int domain = static_cast<int>(spec.domain);
  const unsigned long long key = shared_code::kf_rand_key(seed, stream);
  std::string out(static_cast<size_t>(spec.elements) * bytes, '\0');
  char* p = out.data();
  for (int64_t i = 0; i < spec.elements; ++i, p += bytes) {
    unsigned long long v = shared_code::kf_rand_bits(dt, key, i, domain, spec.index_extent, spec.index_other);
    std::memcpy(p, &v, bytes);  // Little-endian: the low bytes, as the GPU stores them.
  }
  return out;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Alloc(size_t bytes) {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  DeviceBuffer b;
  b.bytes_ = bytes;
  // Zero-byte buffers still get a distinct valid pointer.
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuMemAlloc(&b.ptr_, bytes == 0 ? 256 : bytes), "cuMemAlloc"));
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    o.ptr_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != 0) (*LoadDriver())->cuMemFree(ptr_);
  ptr_ = 0;
}

absl::Status DeviceBuffer::Upload(const std::string& host) const {
  KFUSE_CHECK(host.size() <= bytes_);
  if (host.empty()) return absl::OkStatus();
  const DriverApi* cu = *LoadDriver();
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuMemcpyHtoD(ptr_, host.data(), host.size()), "cuMemcpyHtoD"));
  // From pageable memory the copy may still be in flight on the legacy
  // stream; work on other streams must not see the buffer before it lands.
  return CuCheck(cu->cuCtxSynchronize(), "cuCtxSynchronize after cuMemcpyHtoD");
}

absl::Status DeviceBuffer::CopyOut(size_t offset, void* dst, size_t bytes) const {
  KFUSE_CHECK(offset + bytes <= bytes_);
  if (bytes == 0) return absl::OkStatus();
  return CuCheck((*LoadDriver())->cuMemcpyDtoH(dst, ptr_ + offset, bytes), "cuMemcpyDtoH");
}

absl::StatusOr<std::string> DeviceBuffer::Download() const {
  std::string host(bytes_, '\0');
  if (bytes_ == 0) return host;
  KFUSE_RETURN_IF_ERROR(
      CuCheck((*LoadDriver())->cuMemcpyDtoH(host.data(), ptr_, bytes_), "cuMemcpyDtoH"));
  return host;
}

absl::Status DeviceBuffer::Fill(unsigned char byte) const {
  if (bytes_ == 0) return absl::OkStatus();
  return CuCheck((*LoadDriver())->cuMemsetD8(ptr_, byte, bytes_), "cuMemsetD8");
}

absl::Status DeviceBuffer::FillAsync(unsigned char byte, CUstream stream) const {
  if (bytes_ == 0) return absl::OkStatus();
  return CuCheck((*LoadDriver())->cuMemsetD8Async(ptr_, byte, bytes_, stream), "cuMemsetD8Async");
}

}  // namespace kfuse
