// kfuse-fuzz-compile-sample: NVRTC-compiles the kernels of a sample of fuzz
// corpus chains, which the fuzz loop cannot afford (a compile takes ~0.1 s).
// Every accepted chain's heuristic kernel, in all three Numerics, must
// compile for sm_90; refused chains are skipped.
//
//   kfuse-fuzz-compile-sample 40 build-fuzz/fuzz-corpus/codegen_fuzz tests/fuzz/corpus
//
// Exit status: 0 when every kernel compiled, 1 otherwise, 2 on bad usage.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kfuse/v1/kfuse.pb.h"
#include "tests/fuzz/chain_mutator.h"
#include "tests/fuzz/fuzz_codegen.h"
#include "tuner/nvrtc_compiler.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: kfuse-fuzz-compile-sample N FILE_OR_DIR...\n";
    return 2;
  }
  const size_t want = std::strtoul(argv[1], nullptr, 10);
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const auto& e : fs::directory_iterator(argv[i])) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::is_regular_file(argv[i], ec)) {
      files.push_back(argv[i]);
    }
  }
  std::sort(files.begin(), files.end());
  kfuse::fuzz::SilenceProtobufLogs();

  kfuse::NvrtcCompiler nvrtc;
  kfuse::CompileOptions opts;
  opts.arch = "sm_90";
  opts.want_ptx = false;
  // Accepted chains, evenly spread over the sorted corpus, up to `want`.
  size_t chains = 0, kernels = 0, failures = 0, seen = 0;
  const size_t stride = std::max<size_t>(1, files.size() / std::max<size_t>(1, want * 4));
  for (size_t f = 0; f < files.size() && chains < want; f += stride, ++seen) {
    std::ifstream in(files[f], std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    kfuse::v1::Chain proto;
    if (!proto.ParseFromString(bytes.str())) continue;
    std::vector<kfuse::KernelSpec> specs =
        kfuse::fuzz::GenerateChecked(proto, 0, kfuse::fuzz::Coverage::kHeuristic);
    if (specs.empty()) continue;
    ++chains;
    for (const kfuse::KernelSpec& spec : specs) {
      ++kernels;
      absl::StatusOr<kfuse::CompiledKernel> k = nvrtc.Compile(spec, opts);
      if (!k.ok() || k->cubin.empty()) {
        ++failures;
        std::cerr << files[f] << ": " << spec.entry << ": " << k.status() << "\n"
                  << spec.source << "\n";
      }
    }
  }
  std::cout << "compile sample: " << chains << " accepted chains of " << seen << " files read, "
            << kernels << " kernels compiled for sm_90, " << failures << " failed\n";
  return failures == 0 ? 0 : 1;
}
