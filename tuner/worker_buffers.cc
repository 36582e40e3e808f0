#include "tuner/worker_buffers.h"

#include <cmath>
#include <cstring>

#include "core/status.h"
#include "tuner/check.h"
#include "tuner/cuda/driver.h"

namespace kfuse {
namespace {

// SplitMix64: fast, and good enough for test data.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
};

double Sample(Rng& rng, InputDomain d, bool integer) {
  if (integer) {
    switch (d) {
      case InputDomain::kPositive:
        return 1 + static_cast<double>(rng.Next() % 8);
      case InputDomain::kUnit:
        return static_cast<double>(rng.Next() % 3) - 1;
      case InputDomain::kAny:
        return static_cast<double>(rng.Next() % 17) - 8;
    }
  }
  switch (d) {
    case InputDomain::kPositive:
      return 0.1 + 3.9 * rng.Uniform();
    case InputDomain::kUnit:
      return -1 + 2 * rng.Uniform();
    case InputDomain::kAny:
      break;
  }
  // Irwin-Hall: the sum of four uniforms, centred and scaled to sd 1.
  double s = rng.Uniform() + rng.Uniform() + rng.Uniform() + rng.Uniform();
  return (s - 2) * std::sqrt(3.0);
}

}  // namespace

std::string RandomInput(const BufferSpec& spec, uint64_t seed, uint64_t stream) {
  Rng rng{seed * 0x2545F4914F6CDD1Dull + stream * 0x9E3779B97F4A7C15ull + 1};
  int bytes = DTypeBytes(spec.dtype);
  std::string out(static_cast<size_t>(spec.elements) * bytes, '\0');
  char* p = out.data();
  bool integer = spec.dtype == DType::kI32 || spec.dtype == DType::kI64;
  for (int64_t i = 0; i < spec.elements; ++i, p += bytes) {
    if (spec.dtype == DType::kBool) {
      *p = static_cast<char>(rng.Next() & 1);
      continue;
    }
    double v = Sample(rng, spec.domain, integer);
    switch (spec.dtype) {
      case DType::kF32: {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kF64:
        std::memcpy(p, &v, 8);
        break;
      case DType::kF16: {
        uint16_t h = FloatToHalf(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBF16: {
        uint16_t h = FloatToBF16(static_cast<float>(v));
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kI32: {
        auto x = static_cast<int32_t>(v);
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kI64: {
        auto x = static_cast<int64_t>(v);
        std::memcpy(p, &x, 8);
        break;
      }
      default:
        break;
    }
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
  return CuCheck((*LoadDriver())->cuMemcpyHtoD(ptr_, host.data(), host.size()), "cuMemcpyHtoD");
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

}  // namespace kfuse
