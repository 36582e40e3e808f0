// kfuse-latency: client-side Compile latency against a running kfused.
//
//   kfuse-latency --server 127.0.0.1:7420 --chain examples/relu_fma_f32.json
//       --iterations 2000 --mode hit
//   kfuse-latency --chain examples/transcendental_10op_bf16.json
//       --iterations 20 --mode cold
//
// hit: one Compile to warm the store, then N Compile calls that the store
// answers; the figure is the serving path (gRPC, translate, key, lookup).
// cold: each iteration changes one constant of the chain so its key is new;
// the figure is the heuristic compile path (generate, NVRTC, store).
// fleet: two nodes sharing a fleet store. Each iteration compiles a new
// chain on --server (untimed), then asks --second_server for it: the figure
// is the second node's serving path for a kernel another node built (local
// miss, fleet read, verification, local copy), which must be FLEET_HIT.
//
//   kfuse-latency --server 127.0.0.1:7420 --second_server 127.0.0.1:7421
//       --chain examples/relu_fma_f32.json --iterations 50 --mode fleet
// One channel and one stub for the whole run.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "clients/client.h"
#include "clients/json.h"

ABSL_FLAG(std::string, server, kfuse::client::kDefaultAddress,
          "kfused address HOST:PORT");
ABSL_FLAG(std::string, chain, "examples/relu_fma_f32.json",
          "chain (or CompileRequest) in JSON");
ABSL_FLAG(int, iterations, 1000, "measured Compile calls");
ABSL_FLAG(std::string, mode, "hit", "hit | cold | fleet");
ABSL_FLAG(std::string, second_server, "", "fleet mode: the node that did not build, HOST:PORT");
ABSL_FLAG(double, timeout, 60, "seconds per call");

namespace {

using Clock = std::chrono::steady_clock;

// The i-th of a sequence of distinct values exact in bf16, f16 and f32
// (8 significant bits, modest exponents), so a changed constant is never
// refused as inexact; `salt` keeps separate runs on one store apart.
double DistinctConstant(int i, int salt) {
  const int n = i + salt;
  const double mantissa = 1.0 + (n % 128) / 128.0;
  return std::ldexp(mantissa, (n / 128) % 40 - 20);
}

// Gives the chain's first OP_CONSTANT the i-th fresh value; false when the
// chain has none (adding one would change what the chain computes).
bool SetConstant(kfuse::v1::CompileRequest& req, int i, int salt) {
  for (auto& op : *req.mutable_chain()->mutable_ops()) {
    if (op.kind() != kfuse::v1::OP_CONSTANT) continue;
    if (op.dtype() == kfuse::v1::DTYPE_I32 ||
        op.dtype() == kfuse::v1::DTYPE_I64) {
      op.set_value(1 + ((i + salt) % 1000000));
    } else {
      op.set_value(DistinctConstant(i, salt));
    }
    return true;
  }
  return false;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least p% of samples at or below.
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(idx, v.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "kfuse-latency --server ADDR --chain FILE --iterations N --mode "
      "hit|cold|fleet [--second_server ADDR]");
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int iterations = absl::GetFlag(FLAGS_iterations);
  if ((mode != "hit" && mode != "cold" && mode != "fleet") || iterations <= 0) {
    std::fprintf(stderr, "--mode must be hit, cold or fleet, --iterations > 0\n");
    return 2;
  }
  if ((mode == "fleet") == absl::GetFlag(FLAGS_second_server).empty()) {
    std::fprintf(stderr, "--second_server goes with --mode fleet (and only with it)\n");
    return 2;
  }
  auto request = kfuse::client::LoadCompileRequest(absl::GetFlag(FLAGS_chain));
  if (!request.ok()) {
    std::fprintf(stderr, "%s\n", request.status().ToString().c_str());
    return 2;
  }
  kfuse::client::ClientOptions options;
  options.address = absl::GetFlag(FLAGS_server);
  options.deadline = absl::Seconds(absl::GetFlag(FLAGS_timeout));
  options.client_name = "kfuse-latency";
  options.connect_timeout = absl::Seconds(5);
  auto client = kfuse::client::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 3;
  }
  std::unique_ptr<kfuse::client::Client> second;
  if (mode == "fleet") {
    kfuse::client::ClientOptions o2 = options;
    o2.address = absl::GetFlag(FLAGS_second_server);
    auto c2 = kfuse::client::Client::Connect(o2);
    if (!c2.ok()) {
      std::fprintf(stderr, "%s\n", c2.status().ToString().c_str());
      return 3;
    }
    second = std::move(*c2);
  }
  const int salt = static_cast<int>(std::random_device{}() % 5000);
  if (mode != "hit" && !SetConstant(*request, 0, salt)) {
    std::fprintf(stderr,
                 "--mode cold and fleet need a chain with an OP_CONSTANT to vary\n");
    return 2;
  }
  // Warm: the store (hit) or the server's compile path and NVRTC (cold).
  auto warm = (*client)->Compile(*request);
  if (!warm.ok()) {
    std::fprintf(stderr, "warm-up Compile: %s\n",
                 warm.status().ToString().c_str());
    return 1;
  }
  std::vector<double> seconds;
  seconds.reserve(iterations);
  int unexpected = 0;
  const kfuse::v1::CacheOutcome expected = mode == "hit"    ? kfuse::v1::CACHE_OUTCOME_HIT
                                            : mode == "cold" ? kfuse::v1::CACHE_OUTCOME_MISS
                                                             : kfuse::v1::CACHE_OUTCOME_FLEET_HIT;
  kfuse::client::Client* timed = second != nullptr ? second.get() : client->get();
  for (int i = 0; i < iterations; ++i) {
    if (mode != "hit") SetConstant(*request, i + 1, salt);
    if (mode == "fleet") {
      auto built = (*client)->Compile(*request);  // The first node builds and publishes.
      if (!built.ok()) {
        std::fprintf(stderr, "Compile %d on --server: %s\n", i, built.status().ToString().c_str());
        return 1;
      }
    }
    const auto t0 = Clock::now();
    auto r = timed->Compile(*request);
    const auto t1 = Clock::now();
    if (!r.ok()) {
      std::fprintf(stderr, "Compile %d: %s\n", i,
                   r.status().ToString().c_str());
      return 1;
    }
    if (r->cache() != expected) ++unexpected;
    seconds.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  const double scale = mode == "hit" ? 1e6 : 1e3;
  const char* unit = mode == "hit" ? "us" : "ms";
  std::printf("mode=%s chain=%s iterations=%d server=%s\n", mode.c_str(),
              absl::GetFlag(FLAGS_chain).c_str(), iterations,
              options.address.c_str());
  std::printf("p50=%.1f %s  p90=%.1f %s  p99=%.1f %s  max=%.1f %s\n",
              Percentile(seconds, 50) * scale, unit,
              Percentile(seconds, 90) * scale, unit,
              Percentile(seconds, 99) * scale, unit,
              Percentile(seconds, 100) * scale, unit);
  if (unexpected > 0) {
    std::printf("warning: %d of %d answers were not %s\n", unexpected, iterations,
                kfuse::v1::CacheOutcome_Name(expected).c_str());
  }
  return unexpected > 0 && mode == "fleet" ? 1 : 0;
}
