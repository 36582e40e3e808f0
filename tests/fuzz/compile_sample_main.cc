// kfuse-fuzz-compile-sample: NVRTC-compiles the kernels of a sample of fuzz
// corpus chains, which the fuzz loop cannot afford (a compile takes ~0.1 s).
// Every accepted chain's heuristic kernel, in all three Numerics, must
// compile for sm_90; refused chains are skipped.
//
//   kfuse-fuzz-compile-sample 40 build-fuzz/fuzz-corpus/codegen_fuzz tests/fuzz/corpus
//
// With --space, every variant of each kernel's space instead, as the tuner
// compiles them (a survey: minutes for a few dozen chains); each variant
// that spills registers is listed (`spill:` lines), with a count by family.
// A spill is not a failure (the tuner times such variants like any other);
// a compile failure is.
//
//   kfuse-fuzz-compile-sample --space 40 build-fuzz/fuzz-corpus/codegen_fuzz
//
// Exit status: 0 when every kernel compiled, 1 otherwise, 2 on bad usage.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/variant.h"
#include "kfuse/v1/kfuse.pb.h"
#include "tests/fuzz/chain_mutator.h"
#include "tests/fuzz/fuzz_codegen.h"
#include "tuner/nvrtc_compiler.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  int first = 1;
  const bool space = argc > 1 && std::string(argv[1]) == "--space";
  if (space) ++first;
  if (argc < first + 2) {
    std::cerr << "usage: kfuse-fuzz-compile-sample [--space] N FILE_OR_DIR...\n";
    return 2;
  }
  const size_t want = std::strtoul(argv[first], nullptr, 10);
  const kfuse::fuzz::Coverage coverage =
      space ? kfuse::fuzz::Coverage::kSpace : kfuse::fuzz::Coverage::kHeuristic;
  std::vector<fs::path> files;
  for (int i = first + 1; i < argc; ++i) {
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
  std::map<std::string, std::pair<size_t, size_t>> by_family;  // Kernels, those that spill.
  const size_t stride = std::max<size_t>(1, files.size() / std::max<size_t>(1, want * 4));
  for (size_t f = 0; f < files.size() && chains < want; f += stride, ++seen) {
    std::ifstream in(files[f], std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    kfuse::v1::Chain proto;
    if (!proto.ParseFromString(bytes.str())) continue;
    std::vector<kfuse::KernelSpec> specs =
        kfuse::fuzz::GenerateChecked(proto, 0, coverage);
    if (specs.empty()) continue;
    ++chains;
    for (const kfuse::KernelSpec& spec : specs) {
      ++kernels;
      absl::StatusOr<kfuse::CompiledKernel> k = nvrtc.Compile(spec, opts);
      if (!k.ok() || k->cubin.empty()) {
        ++failures;
        std::cerr << files[f] << ": " << spec.entry << ": " << k.status() << "\n"
                  << spec.source << "\n";
        continue;
      }
      if (!space) continue;
      std::pair<size_t, size_t>& counts = by_family[std::string(kfuse::FamilyName(spec.variant.family))];
      ++counts.first;
      if (k->resources.spill_bytes == 0) continue;
      ++counts.second;
      std::cout << "spill: " << files[f].filename().string() << " " << spec.variant.ToString() << " "
                << k->resources.registers << " registers, " << k->resources.spill_bytes
                << " bytes spilled\n";
    }
  }
  for (const auto& [family, counts] : by_family) {
    std::cout << "space " << family << ": " << counts.first << " variants, " << counts.second
              << " spill\n";
  }
  std::cout << "compile sample: " << chains << " accepted chains of " << seen << " files read, "
            << kernels << " kernels compiled for sm_90, " << failures << " failed\n";
  return failures == 0 ? 0 : 1;
}
