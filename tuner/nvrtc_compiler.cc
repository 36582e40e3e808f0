#include "tuner/nvrtc_compiler.h"

#include <nvrtc.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status.h"

namespace kfuse {
namespace {

constexpr size_t kErrorLogBytes = 4096;  // Log kept in an error message.
// Generated sources are tens of KB; a larger one is refused before NVRTC
// sees it (NVRTC's memory grows with the source it parses).
constexpr size_t kMaxSourceBytes = size_t{4} << 20;

// The process-wide bound on NVRTC programs compiling at once (job threads
// and the tuner's compile pools share it), so NVRTC's memory is bounded by
// that many programs' peaks.
struct Gate {
  absl::Mutex mu;
  int limit ABSL_GUARDED_BY(mu) = kDefaultMaxConcurrentCompiles;
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  int peak ABSL_GUARDED_BY(mu) = 0;
};

Gate& TheGate() {
  static Gate* g = new Gate;
  return *g;
}

// Takes a slot (waiting for one, checking `cancel`); releases it on scope
// exit. ok() false when cancelled while waiting.
class Slot {
 public:
  explicit Slot(const std::atomic<bool>* cancel) {
    Gate& g = TheGate();
    absl::MutexLock lock(&g.mu);
    auto free = [&g]() ABSL_SHARED_LOCKS_REQUIRED(g.mu) { return g.in_flight < g.limit; };
    while (!g.mu.AwaitWithTimeout(absl::Condition(&free), absl::Milliseconds(20))) {
      if (cancel != nullptr && cancel->load()) return;
    }
    held_ = true;
    g.peak = std::max(g.peak, ++g.in_flight);
  }
  ~Slot() {
    if (!held_) return;
    Gate& g = TheGate();
    absl::MutexLock lock(&g.mu);
    --g.in_flight;
  }
  bool ok() const { return held_; }

 private:
  bool held_ = false;
};
constexpr size_t kKeptLogBytes = 65536;  // Log kept in a CompiledKernel.

// NVRTC's flow callback: 1 cancels. Runs on the compiling thread; reads only.
int CancelCallback(void* payload, void* /*reserved*/) {
  return static_cast<const std::atomic<bool>*>(payload)->load(
             std::memory_order_relaxed)
             ? 1
             : 0;
}

// Destroys the program on every path out of Compile.
class ProgramGuard {
 public:
  explicit ProgramGuard(nvrtcProgram p) : p_(p) {}
  ~ProgramGuard() { nvrtcDestroyProgram(&p_); }
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  nvrtcProgram p_;
};

absl::Status NvrtcError(nvrtcResult r, absl::string_view what) {
  std::string msg = absl::StrCat("NVRTC ", what, ": ", nvrtcGetErrorString(r));
  if (r == NVRTC_ERROR_OUT_OF_MEMORY) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

std::string ProgramLog(nvrtcProgram p) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(p, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(p, log.data()) != NVRTC_SUCCESS) return "";
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

std::string Truncated(const std::string& s, size_t limit) {
  if (s.size() <= limit) return s;
  return absl::StrCat(s.substr(0, limit), "\n... (", s.size() - limit,
                      " more bytes of log)");
}

// Parses the unsigned integer that ends right before `suffix` in `line`
// ("Used 16 registers" with suffix " registers" gives 16).
std::optional<uint32_t> NumberBefore(absl::string_view line,
                                     absl::string_view suffix) {
  size_t end = line.find(suffix);
  if (end == absl::string_view::npos) return std::nullopt;
  size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  uint32_t v = 0;
  if (begin == end || !absl::SimpleAtoi(line.substr(begin, end - begin), &v)) {
    return std::nullopt;
  }
  return v;
}

// The name in "...Compiling entry function 'k' for 'sm_90'".
absl::string_view QuotedAfter(absl::string_view line, absl::string_view key) {
  size_t at = line.find(key);
  if (at == absl::string_view::npos) return {};
  absl::string_view rest = line.substr(at + key.size());
  size_t close = rest.find('\'');
  return close == absl::string_view::npos ? absl::string_view()
                                          : rest.substr(0, close);
}

// "sm_90a" -> 90. The allowlist guarantees the shape.
int ArchNumber(const std::string& arch) {
  int n = 0;
  for (size_t i = 3; i < arch.size() && arch[i] >= '0' && arch[i] <= '9'; ++i) {
    n = n * 10 + (arch[i] - '0');
  }
  return n;
}

}  // namespace

std::string NvrtcVersionString() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "nvrtc-unknown";
  return absl::StrCat("nvrtc-", major, ".", minor);
}

std::vector<std::string> SupportedArchs() {
  int n = 0;
  std::vector<int> numbers;
  if (nvrtcGetNumSupportedArchs(&n) == NVRTC_SUCCESS && n > 0) {
    numbers.resize(n);
    if (nvrtcGetSupportedArchs(numbers.data()) != NVRTC_SUCCESS)
      numbers.clear();
  }
  std::vector<std::string> out;
  for (const std::string& arch : KnownArchs()) {
    if (std::find(numbers.begin(), numbers.end(), ArchNumber(arch)) !=
        numbers.end()) {
      out.push_back(arch);
    }
  }
  return out;
}

std::vector<std::string> NvrtcOptions(const CompileOptions& opts) {
  std::vector<std::string> out = {
      absl::StrCat("--gpu-architecture=", opts.arch), "--std=c++17",
      "--ptxas-options=-v",  // Resource usage in the log.
  };
  if (opts.line_info) out.push_back("-lineinfo");
  if (opts.max_registers > 0) {
    out.push_back(absl::StrCat("--maxrregcount=", opts.max_registers));
  }
  return out;
}

std::optional<Resources> ParsePtxasResources(absl::string_view log,
                                             absl::string_view entry) {
  Resources r;
  bool found = false;
  absl::string_view compiling;   // Entry whose "Used" line comes next.
  absl::string_view properties;  // Function whose stack line comes next.
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    absl::string_view name = QuotedAfter(line, "Compiling entry function '");
    if (!name.empty()) {
      compiling = name;
      continue;
    }
    size_t at = line.find("Function properties for ");
    if (at != absl::string_view::npos) {
      properties = line.substr(at + 24);
      while (!properties.empty() &&
             (properties.back() == ' ' || properties.back() == '\r')) {
        properties.remove_suffix(1);
      }
      continue;
    }
    if (properties == entry && line.find("stack frame") != line.npos) {
      r.local_bytes = NumberBefore(line, " bytes stack frame").value_or(0);
      r.spill_bytes = NumberBefore(line, " bytes spill stores").value_or(0) +
                      NumberBefore(line, " bytes spill loads").value_or(0);
      continue;
    }
    if (compiling == entry) {
      std::optional<uint32_t> regs = NumberBefore(line, " registers");
      if (regs.has_value() && line.find("Used ") != line.npos) {
        r.registers = *regs;
        r.static_smem_bytes = NumberBefore(line, " bytes smem").value_or(0);
        found = true;
      }
    }
  }
  if (!found) return std::nullopt;
  return r;
}

void SetMaxConcurrentCompiles(int n) {
  Gate& g = TheGate();
  absl::MutexLock lock(&g.mu);
  g.limit = std::max(1, n);
  g.peak = g.in_flight;
}

int PeakConcurrentCompiles() {
  Gate& g = TheGate();
  absl::MutexLock lock(&g.mu);
  return g.peak;
}

NvrtcCompiler::NvrtcCompiler()
    : version_(NvrtcVersionString()), supported_(SupportedArchs()) {}

absl::StatusOr<CompiledKernel> NvrtcCompiler::Compile(
    const KernelSpec& spec, const CompileOptions& opts,
    const std::atomic<bool>* cancel) {
  KFUSE_RETURN_IF_ERROR(ValidateCompileRequest(spec, opts));
  if (std::find(supported_.begin(), supported_.end(), opts.arch) ==
      supported_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile options: arch ", opts.arch,
                     " is not supported by ", version_));
  }
  if (spec.source.size() > kMaxSourceBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "generated source of ", spec.source.size(), " bytes for ", spec.entry,
        " exceeds the compiler's limit of ", kMaxSourceBytes, " bytes"));
  }
  auto start = std::chrono::steady_clock::now();
  Slot slot(cancel);
  if (!slot.ok()) {
    return absl::CancelledError(absl::StrCat("compile of ", spec.entry, " for ",
                                             opts.arch, " cancelled while waiting for NVRTC"));
  }

  nvrtcProgram prog = nullptr;
  std::string file = absl::StrCat(spec.entry, ".cu");
  nvrtcResult r = nvrtcCreateProgram(&prog, spec.source.c_str(), file.c_str(),
                                     0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "create program");
  ProgramGuard guard(prog);
  if (cancel != nullptr) {
    // NVRTC's payload is void*; CancelCallback only reads through it.
    r = nvrtcSetFlowCallback(prog, &CancelCallback,
                             const_cast<std::atomic<bool>*>(cancel));
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "set flow callback");
  }

  std::vector<std::string> options = NvrtcOptions(opts);
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
  std::string log = ProgramLog(prog);
  if (r == NVRTC_ERROR_CANCELLED) {
    return absl::CancelledError(absl::StrCat("compile of ", spec.entry, " for ",
                                             opts.arch, " cancelled"));
  }
  if (r != NVRTC_SUCCESS) {
    absl::Status s = NvrtcError(
        r, absl::StrCat("compile of ", spec.entry, " for ", opts.arch));
    return absl::Status(s.code(), absl::StrCat(s.message(), "\n",
                                               Truncated(log, kErrorLogBytes)));
  }

  CompiledKernel out;
  size_t size = 0;
  r = nvrtcGetCUBINSize(prog, &size);
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "get cubin size");
  out.cubin.resize(size);
  r = nvrtcGetCUBIN(prog, out.cubin.data());
  if (r != NVRTC_SUCCESS) return NvrtcError(r, "get cubin");
  {  // PTX is always read: it proves the entry exists when ptxas says nothing.
    r = nvrtcGetPTXSize(prog, &size);
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "get PTX size");
    out.ptx.resize(size);
    r = nvrtcGetPTX(prog, out.ptx.data());
    if (r != NVRTC_SUCCESS) return NvrtcError(r, "get PTX");
    while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  }

  std::optional<Resources> res = ParsePtxasResources(log, spec.entry);
  // Some NVRTC builds return no ptxas report at all (seen on the H200
  // machine's NVRTC 13.0): the entry is then checked in the PTX, and the
  // resources stay unknown (zero).
  if (!res.has_value() && log.find("ptxas") == std::string::npos &&
      out.ptx.find(absl::StrCat(".entry ", spec.entry, "(")) != std::string::npos) {
    res = Resources{};
  }
  if (!opts.want_ptx) out.ptx.clear();
  if (!res.has_value()) {
    // The generator named an entry its source does not define as an
    // extern "C" __global__ function: the runner could not launch it.
    return absl::InternalError(absl::StrCat(
        "compiled source has no extern \"C\" kernel named ", spec.entry,
        " for ", opts.arch, "\n", Truncated(log, kErrorLogBytes)));
  }
  out.resources = *res;
  out.spec = spec;
  out.arch = opts.arch;
  out.log = Truncated(log, kKeptLogBytes);
  out.compile_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return out;
}

}  // namespace kfuse
