// What the GPU property tests share: the device (or why there is none) and
// device memory freed at scope exit, and the plan tensors and symbol table
// of a chain as the service fills them in. Tests skip when OpenGpu() fails.
#ifndef KFUSE_TESTS_GPU_TEST_UTIL_H_
#define KFUSE_TESTS_GPU_TEST_UTIL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/ir.h"
#include "core/status.h"
#include "kfuse/v1/kfuse.pb.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"

namespace kfuse {
namespace gpu_test {

struct Gpu {
  const DriverApi* cu = nullptr;
  ScopedPrimaryContext ctx;
  std::string arch;
};

inline absl::StatusOr<Gpu> OpenGpu() {
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  if (DeviceCount() == 0) return absl::UnavailableError("no CUDA device");
  KFUSE_ASSIGN_OR_RETURN(ScopedPrimaryContext ctx, ScopedPrimaryContext::Create(0));
  KFUSE_ASSIGN_OR_RETURN(DeviceFingerprint fp, QueryDevice(0));
  return Gpu{cu, std::move(ctx), ArchForDevice(fp)};
}

// Device memory freed at scope exit.
class DeviceMemory {
 public:
  explicit DeviceMemory(const DriverApi* cu) : cu_(cu) {}
  ~DeviceMemory() {
    for (CUdeviceptr p : ptrs_) cu_->cuMemFree(p);
  }
  CUdeviceptr Upload(const std::string& bytes) {
    CUdeviceptr p = Alloc(bytes.size());
    KFUSE_CHECK(cu_->cuMemcpyHtoD(p, bytes.data(), bytes.size()) == CUDA_SUCCESS);
    return p;
  }
  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    KFUSE_CHECK(cu_->cuMemAlloc(&p, std::max<size_t>(bytes, 16)) == CUDA_SUCCESS);
    ptrs_.push_back(p);
    return p;
  }
  std::string Download(CUdeviceptr p, size_t bytes) {
    std::string out(bytes, '\0');
    KFUSE_CHECK(cu_->cuMemcpyDtoH(out.data(), p, bytes) == CUDA_SUCCESS);
    return out;
  }

 private:
  const DriverApi* cu_;
  std::vector<CUdeviceptr> ptrs_;
};

inline std::vector<int64_t> ShapeOf(const TensorType& t, const std::vector<int64_t>& symbols) {
  std::vector<int64_t> s;
  for (const Dim& d : t.shape) s.push_back(d.is_static() ? d.size : symbols[d.symbol]);
  return s;
}

// The plan's tensors and symbol table, as the service fills them in.
inline v1::KernelPlan PlanFor(const Chain& c) {
  v1::KernelPlan plan;
  plan.set_api_version("kfuse.v1");
  for (const SymbolInfo& s : c.symbols) plan.add_symbols()->set_name(s.name);
  auto spec = [&](const TensorType& t, v1::TensorSpec* out) {
    out->set_dtype(static_cast<v1::DType>(t.dtype));
    for (const Dim& d : t.shape) {
      if (d.is_static())
        out->add_shape()->set_size(d.size);
      else
        out->add_shape()->set_symbol(c.symbols[d.symbol].name);
    }
  };
  for (const Node& n : c.nodes) {
    if (n.kind != OpKind::kInput) continue;
    v1::TensorSpec* in = plan.add_inputs();
    in->set_name(absl::StrCat("in", n.input_index));
    spec(n.type, in);
    for (int axis = 0; axis < n.type.rank(); ++axis) {
      const Dim& d = n.type.shape[axis];
      if (d.is_static()) continue;
      v1::SymbolSource* src = plan.mutable_symbols(d.symbol)->add_sources();
      src->set_input(n.input_index);
      src->set_axis(axis);
    }
  }
  for (size_t j = 0; j < c.outputs.size(); ++j) {
    v1::TensorSpec* out = plan.add_outputs();
    out->set_name(absl::StrCat("out", j));
    spec(c.nodes[c.outputs[j]].type, out);
  }
  return plan;
}

}  // namespace gpu_test
}  // namespace kfuse

#endif  // KFUSE_TESTS_GPU_TEST_UTIL_H_
