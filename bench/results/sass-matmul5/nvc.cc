#include <nvrtc.h>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <vector>
#include <string>
int main(int argc, char** argv) {
  std::ifstream f(argv[1]); std::stringstream ss; ss << f.rdbuf(); std::string src = ss.str();
  nvrtcProgram p; nvrtcCreateProgram(&p, src.c_str(), "k.cu", 0, nullptr, nullptr);
  const char* opts[] = {"--gpu-architecture=sm_90a", "--std=c++17", "--ptxas-options=-v"};
  nvrtcResult r = nvrtcCompileProgram(p, 3, opts);
  size_t n; nvrtcGetProgramLogSize(p, &n); std::vector<char> log(n); nvrtcGetProgramLog(p, log.data()); fprintf(stderr, "%s\n", log.data());
  if (r != NVRTC_SUCCESS) return 1;
  nvrtcGetCUBINSize(p, &n); std::vector<char> c(n); nvrtcGetCUBIN(p, c.data());
  std::ofstream o(argv[2], std::ios::binary); o.write(c.data(), n);
}
