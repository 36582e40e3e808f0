#include "tuner/worker_nvrtc.h"

#include <nvrtc.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace kfuse {

absl::StatusOr<std::string> CompileToCubin(const std::string& source, const std::string& arch) {
  nvrtcProgram prog = nullptr;
  if (nvrtcCreateProgram(&prog, source.c_str(), "kfuse_micro.cu", 0, nullptr, nullptr) !=
      NVRTC_SUCCESS) {
    return absl::InternalError("nvrtcCreateProgram failed");
  }
  std::string arch_opt = absl::StrCat("--gpu-architecture=", arch);
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "-default-device"};
  nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
  std::string out;
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    nvrtcGetProgramLogSize(prog, &n);
    std::string log(n, '\0');
    nvrtcGetProgramLog(prog, log.data());
    nvrtcDestroyProgram(&prog);
    return absl::InternalError(
        absl::StrCat("NVRTC (", nvrtcGetErrorString(r), "): ", log.substr(0, 2000)));
  }
  size_t n = 0;
  nvrtcGetCUBINSize(prog, &n);
  out.resize(n);
  nvrtcGetCUBIN(prog, out.data());
  nvrtcDestroyProgram(&prog);
  if (out.empty()) return absl::InternalError("NVRTC produced no cubin (virtual arch?)");
  return out;
}

}  // namespace kfuse
