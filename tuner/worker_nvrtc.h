// A bare NVRTC call for the worker's own micro-kernels (ceilings) and for GPU
// tests' planted kernels. Generated kernels go through tuner/compiler.h.
//
//   KFUSE_ASSIGN_OR_RETURN(std::string cubin, CompileToCubin(src, "sm_90a"));
#ifndef KFUSE_TUNER_WORKER_NVRTC_H_
#define KFUSE_TUNER_WORKER_NVRTC_H_

#include <string>

#include "absl/status/statusor.h"

namespace kfuse {

// Compiles self-contained CUDA C++ (no #include) to a cubin for `arch`
// ("sm_90a"). Internal with the start of the log when it does not compile.
absl::StatusOr<std::string> CompileToCubin(const std::string& source, const std::string& arch);

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_NVRTC_H_
