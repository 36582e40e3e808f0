// kfuse-load: closed-loop load on a running kfused through the gRPC async
// (CompletionQueue) API: N logical clients each keep one Compile in flight
// for a bounded time, mixing store hits, misses and malformed chains, then
// check that nothing was lost.
//
//   kfuse-load --server 127.0.0.1:7420 --clients 1000 --duration 60
//       --hit_fraction 0.9 --miss_fraction 0.05 --bad_fraction 0.05
//
// hit: one of --hit_chains pre-warmed chains; the answer must be OK, a hit,
//   with the key the warm-up returned.
// miss: the same chain with a constant never used before, so the key is new
//   and the server compiles (heuristic without a GPU). OK, or
//   RESOURCE_EXHAUSTED when the job queue is full (intended).
// bad: a malformed chain (ref to a later op, shapes that do not broadcast,
//   rank past the limit, too many ops); must be INVALID_ARGUMENT.
// At the end: every call issued completed exactly once, every OK miss is
// then a Lookup hit with the same key, and the server is SERVING. Exit 0
// when only intended codes were seen and nothing was lost, 1 otherwise.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "clients/client.h"
#include "kfuse/v1/kfuse.grpc.pb.h"

ABSL_FLAG(std::string, server, kfuse::client::kDefaultAddress, "kfused address HOST:PORT");
ABSL_FLAG(int, clients, 1000, "logical clients, each with one call in flight");
ABSL_FLAG(int, clients_per_channel, 50, "logical clients sharing one channel (HTTP/2 connection)");
ABSL_FLAG(int, threads, 1, "client threads, each polling its own completion queue");
ABSL_FLAG(double, duration, 10, "seconds of load");
ABSL_FLAG(double, hit_fraction, 1.0, "share of calls for pre-warmed chains");
ABSL_FLAG(double, miss_fraction, 0.0, "share of calls for never-seen chains (compile path)");
ABSL_FLAG(double, bad_fraction, 0.0, "share of malformed calls (INVALID_ARGUMENT)");
ABSL_FLAG(int, hit_chains, 16, "distinct pre-warmed chains the hits cycle through");
ABSL_FLAG(double, deadline, 30, "per-call deadline, seconds");
ABSL_FLAG(int, elements, 1 << 20, "elements of each input tensor");
ABSL_FLAG(uint64_t, seed, 0, "constant-space offset and mix seed (0: random)");

namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = kfuse::v1;

enum Kind { kHit = 0, kMiss = 1, kBad = 2, kKinds = 3 };
const char* KindName(int k) { return k == kHit ? "hit" : k == kMiss ? "miss" : "bad"; }
constexpr int kCodes = 17;

const char* CodeName(int c) {
  static const char* const kNames[kCodes] = {
      "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
      "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
      "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
      "UNAUTHENTICATED"};
  return c >= 0 && c < kCodes ? kNames[c] : "?";
}

// The n-th of ~20M distinct f32 values (21 significant bits, exponents
// -10..9), never 0 or 1, so each n gives a chain with its own key.
double NthConstant(uint64_t n) {
  constexpr uint64_t kMantissas = (uint64_t{1} << 20) - 1;
  const double mantissa = 1.0 + static_cast<double>(n % kMantissas + 1) / (1 << 20);
  return std::ldexp(mantissa, static_cast<int>((n / kMantissas) % 20) - 10);
}

v1::TensorSpec Tensor(const std::string& name, const std::vector<int64_t>& shape) {
  v1::TensorSpec t;
  t.set_name(name);
  t.set_dtype(v1::DTYPE_F32);
  for (int64_t s : shape) t.add_shape()->set_size(s);
  return t;
}
v1::Ref In(uint32_t i) { v1::Ref r; r.set_input(i); return r; }
v1::Ref Op(uint32_t i) { v1::Ref r; r.set_op(i); return r; }
void AddOp(v1::Chain* c, v1::OpKind kind, std::vector<v1::Ref> args) {
  v1::Op* op = c->add_ops();
  op->set_kind(kind);
  for (v1::Ref& r : args) *op->add_args() = r;
}

// relu((a*b + c) * k): three inputs, one constant.
v1::CompileRequest GoodRequest(uint64_t n, int64_t elements) {
  v1::CompileRequest req;
  v1::Chain* c = req.mutable_chain();
  for (const char* name : {"a", "b", "c"}) *c->add_inputs() = Tensor(name, {elements});
  AddOp(c, v1::OP_MUL, {In(0), In(1)});
  AddOp(c, v1::OP_ADD, {Op(0), In(2)});
  v1::Op* k = c->add_ops();
  k->set_kind(v1::OP_CONSTANT);
  k->set_dtype(v1::DTYPE_F32);
  k->set_value(NthConstant(n));
  AddOp(c, v1::OP_MUL, {Op(1), Op(2)});
  AddOp(c, v1::OP_RELU, {Op(3)});
  v1::Output* out = c->add_outputs();
  out->set_name("out");
  *out->mutable_value() = Op(4);
  req.mutable_env()->set_client("kfuse-load/0.1.0");
  return req;
}

// Malformed chains, each refused by a different check.
std::vector<v1::CompileRequest> BadRequests(int64_t elements) {
  std::vector<v1::CompileRequest> bad;
  {  // An op refers to a later op.
    v1::CompileRequest r = GoodRequest(0, elements);
    r.mutable_chain()->mutable_ops(0)->mutable_args(1)->set_op(3);
    bad.push_back(r);
  }
  {  // Shapes that do not broadcast.
    v1::CompileRequest r = GoodRequest(0, elements);
    *r.mutable_chain()->mutable_inputs(2) = Tensor("c", {elements + 1});
    bad.push_back(r);
  }
  {  // Rank 9 (the limit is 8).
    v1::CompileRequest r = GoodRequest(0, elements);
    for (int i = 0; i < 3; ++i) *r.mutable_chain()->mutable_inputs(i) = Tensor("x", std::vector<int64_t>(9, 2));
    bad.push_back(r);
  }
  {  // 513 ops (the limit is 512).
    v1::CompileRequest r = GoodRequest(0, elements);
    v1::Chain* c = r.mutable_chain();
    while (c->ops_size() < 513) AddOp(c, v1::OP_RELU, {Op(c->ops_size() - 1)});
    c->mutable_outputs(0)->mutable_value()->set_op(512);
    bad.push_back(r);
  }
  return bad;
}

struct Stats {
  uint64_t codes[kKinds][kCodes] = {};
  std::vector<float> latency_us[kKinds];  // OK and intended errors alike.
  uint64_t wrong_answer = 0;               // Hit not a hit, or with another key.
  uint64_t duplicate_completion = 0;
  uint64_t miss_joined = 0, miss_was_hit = 0;
  std::vector<std::pair<uint64_t, std::string>> ok_misses;  // (constant index, key)
  std::vector<std::string> samples;  // First few unintended errors.
};

// One logical client: one call in flight at a time.
struct Call {
  int id = 0;
  v1::KernelService::Stub* stub = nullptr;
  std::unique_ptr<grpc::ClientContext> ctx;
  std::unique_ptr<grpc::ClientAsyncResponseReader<v1::CompileResponse>> rpc;
  v1::CompileRequest req;
  v1::CompileResponse resp;
  grpc::Status status;
  Kind kind = kHit;
  int hit_index = 0;
  uint64_t constant = 0;
  Clock::time_point start;
  bool in_flight = false;
};

struct Shared {
  std::vector<v1::CompileRequest> hits;
  std::vector<std::string> hit_keys;
  std::vector<v1::CompileRequest> bad;
  std::atomic<uint64_t> next_miss{0};
  uint64_t miss_base = 0;
  int64_t elements = 0;
  double hit_fraction = 1, miss_fraction = 0;
  absl::Duration deadline;
};

void Issue(Call* c, Shared* s, grpc::CompletionQueue* cq, std::mt19937_64* rng) {
  const double u = std::uniform_real_distribution<double>(0, 1)(*rng);
  if (u < s->hit_fraction) {
    c->kind = kHit;
    c->hit_index = static_cast<int>((*rng)() % s->hits.size());
    c->req = s->hits[c->hit_index];
  } else if (u < s->hit_fraction + s->miss_fraction) {
    c->kind = kMiss;
    c->constant = s->miss_base + s->next_miss.fetch_add(1);
    c->req = GoodRequest(c->constant, s->elements);
  } else {
    c->kind = kBad;
    c->req = s->bad[(*rng)() % s->bad.size()];
  }
  c->ctx = std::make_unique<grpc::ClientContext>();
  c->ctx->set_deadline(absl::ToChronoTime(absl::Now() + s->deadline));
  c->resp.Clear();
  c->in_flight = true;
  c->start = Clock::now();
  c->rpc = c->stub->PrepareAsyncCompile(c->ctx.get(), c->req, cq);
  c->rpc->StartCall();
  c->rpc->Finish(&c->resp, &c->status, c);
}

bool Intended(Kind k, int code) {
  switch (k) {
    case kHit: return code == grpc::OK;
    case kMiss: return code == grpc::OK || code == grpc::RESOURCE_EXHAUSTED;
    default: return code == grpc::INVALID_ARGUMENT;
  }
}

void Record(Call* c, Shared* s, Stats* st) {
  if (!c->in_flight) {
    ++st->duplicate_completion;
    return;
  }
  c->in_flight = false;
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - c->start).count();
  const int code = std::min<int>(c->status.error_code(), kCodes - 1);
  ++st->codes[c->kind][code];
  st->latency_us[c->kind].push_back(static_cast<float>(us));
  if (!Intended(c->kind, code) && st->samples.size() < 5) {
    st->samples.push_back(absl::StrCat(KindName(c->kind), ": ", CodeName(code), ": ",
                                       c->status.error_message()));
  }
  if (!c->status.ok()) return;
  if (c->kind == kHit) {
    if (c->resp.cache() != v1::CACHE_OUTCOME_HIT || c->resp.plan().key() != s->hit_keys[c->hit_index]) {
      ++st->wrong_answer;
    }
  } else if (c->kind == kMiss) {
    if (c->resp.cache() == v1::CACHE_OUTCOME_JOINED) ++st->miss_joined;
    if (c->resp.cache() == v1::CACHE_OUTCOME_HIT) ++st->miss_was_hit;
    if (c->resp.plan().key().empty()) ++st->wrong_answer;
    st->ok_misses.emplace_back(c->constant, c->resp.plan().key());
  }
}

// Drives `calls` on its own completion queue until `end`, then drains.
// Returns the calls still in flight after the drain limit (lost).
int Drive(std::vector<Call*> calls, Shared* s, Clock::time_point end, Clock::time_point drain_end,
          uint64_t seed, Stats* st) {
  grpc::CompletionQueue cq;
  std::mt19937_64 rng(seed);
  for (Call* c : calls) Issue(c, s, &cq, &rng);
  int in_flight = static_cast<int>(calls.size());
  while (in_flight > 0) {
    void* tag = nullptr;
    bool ok = false;
    auto status = cq.AsyncNext(&tag, &ok, std::chrono::system_clock::now() + std::chrono::milliseconds(100));
    if (status == grpc::CompletionQueue::SHUTDOWN) break;
    if (status == grpc::CompletionQueue::TIMEOUT) {
      if (Clock::now() > drain_end) break;
      continue;
    }
    Call* c = static_cast<Call*>(tag);
    Record(c, s, st);
    if (Clock::now() < end) {
      Issue(c, s, &cq, &rng);
    } else {
      --in_flight;
    }
  }
  int lost = 0;
  for (Call* c : calls) {
    if (c->in_flight) {
      ++lost;
      c->ctx->TryCancel();
    }
  }
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {}
  return lost;
}

double Percentile(std::vector<float>& v, double p) {
  if (v.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t idx = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  std::nth_element(v.begin(), v.begin() + std::min(idx, v.size() - 1), v.end());
  return v[std::min(idx, v.size() - 1)];
}

std::string Ms(double us) { return us < 1000 ? absl::StrCat(std::lround(us), " us")
                                             : absl::StrCat(std::lround(us / 100) / 10.0, " ms"); }

double CpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "kfuse-load --server ADDR --clients N --duration S --hit_fraction F --miss_fraction F --bad_fraction F");
  absl::ParseCommandLine(argc, argv);
  const int n_clients = absl::GetFlag(FLAGS_clients);
  const int per_channel = std::max(1, absl::GetFlag(FLAGS_clients_per_channel));
  const int n_threads = std::max(1, std::min(absl::GetFlag(FLAGS_threads), n_clients));
  const double duration = absl::GetFlag(FLAGS_duration);
  Shared s;
  s.hit_fraction = absl::GetFlag(FLAGS_hit_fraction);
  s.miss_fraction = absl::GetFlag(FLAGS_miss_fraction);
  const double bad_fraction = absl::GetFlag(FLAGS_bad_fraction);
  const double sum = s.hit_fraction + s.miss_fraction + bad_fraction;
  if (n_clients <= 0 || duration <= 0 || std::abs(sum - 1) > 1e-6 || s.hit_fraction < 0 ||
      s.miss_fraction < 0 || bad_fraction < 0 || absl::GetFlag(FLAGS_hit_chains) <= 0) {
    std::fprintf(stderr, "--clients and --duration > 0; the fractions >= 0 and sum to 1; --hit_chains > 0\n");
    return 2;
  }
  s.elements = absl::GetFlag(FLAGS_elements);
  s.deadline = absl::Seconds(absl::GetFlag(FLAGS_deadline));
  uint64_t seed = absl::GetFlag(FLAGS_seed);
  if (seed == 0) seed = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  // Each run takes its own stretch of the constant space, so its misses are
  // new even on a store earlier runs filled.
  const uint64_t base = (seed % 1000) * 20000;
  s.miss_base = base + absl::GetFlag(FLAGS_hit_chains);
  s.bad = BadRequests(s.elements);

  kfuse::client::ClientOptions copts;
  copts.address = absl::GetFlag(FLAGS_server);
  copts.deadline = absl::Seconds(60);
  copts.connect_timeout = absl::Seconds(5);
  copts.client_name = "kfuse-load";
  auto admin = kfuse::client::Client::Connect(copts);
  if (!admin.ok()) {
    std::fprintf(stderr, "%s\n", admin.status().ToString().c_str());
    return 3;
  }
  // Warm the hit chains: compiled (or found) once, then hits with this key.
  for (int i = 0; i < absl::GetFlag(FLAGS_hit_chains); ++i) {
    v1::CompileRequest req = GoodRequest(base + i, s.elements);
    auto r = (*admin)->Compile(req);
    if (!r.ok()) {
      std::fprintf(stderr, "warm-up Compile %d: %s\n", i, r.status().ToString().c_str());
      return 1;
    }
    s.hits.push_back(req);
    s.hit_keys.push_back(r->plan().key());
  }

  std::vector<std::unique_ptr<v1::KernelService::Stub>> stubs;
  for (int i = 0; i * per_channel < n_clients; ++i) {
    grpc::ChannelArguments args;
    // A channel of its own (own subchannel, own TCP connection) per group.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("kfuse.load.channel", i);
    args.SetMaxReceiveMessageSize(64 << 20);
    stubs.push_back(v1::KernelService::NewStub(
        grpc::CreateCustomChannel(copts.address, grpc::InsecureChannelCredentials(), args)));
  }
  std::vector<Call> calls(n_clients);
  std::vector<std::vector<Call*>> slices(n_threads);
  for (int i = 0; i < n_clients; ++i) {
    calls[i].id = i;
    calls[i].stub = stubs[i / per_channel].get();
    slices[i % n_threads].push_back(&calls[i]);
  }

  std::printf("kfuse-load: server=%s clients=%d channels=%zu threads=%d duration=%.0fs mix hit/miss/bad=%.3f/%.3f/%.3f deadline=%.0fs\n",
              copts.address.c_str(), n_clients, stubs.size(), n_threads, duration, s.hit_fraction,
              s.miss_fraction, bad_fraction, absl::ToDoubleSeconds(s.deadline));
  std::fflush(stdout);
  std::vector<Stats> stats(n_threads);
  std::vector<int> lost(n_threads, 0);
  const double cpu0 = CpuSeconds();
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration));
  const Clock::time_point drain_end = end + absl::ToChronoNanoseconds(s.deadline + absl::Seconds(10));
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t) {
    threads.emplace_back([&, t] { lost[t] = Drive(slices[t], &s, end, drain_end, seed + t, &stats[t]); });
  }
  for (std::thread& t : threads) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = CpuSeconds() - cpu0;

  Stats all;
  int lost_total = 0;
  for (int t = 0; t < n_threads; ++t) {
    lost_total += lost[t];
    for (int k = 0; k < kKinds; ++k) {
      for (int c = 0; c < kCodes; ++c) all.codes[k][c] += stats[t].codes[k][c];
      all.latency_us[k].insert(all.latency_us[k].end(), stats[t].latency_us[k].begin(), stats[t].latency_us[k].end());
    }
    all.wrong_answer += stats[t].wrong_answer;
    all.duplicate_completion += stats[t].duplicate_completion;
    all.miss_joined += stats[t].miss_joined;
    all.miss_was_hit += stats[t].miss_was_hit;
    all.ok_misses.insert(all.ok_misses.end(), stats[t].ok_misses.begin(), stats[t].ok_misses.end());
    for (const std::string& m : stats[t].samples) if (all.samples.size() < 5) all.samples.push_back(m);
  }

  uint64_t total = 0, unintended = 0;
  for (int k = 0; k < kKinds; ++k)
    for (int c = 0; c < kCodes; ++c) {
      total += all.codes[k][c];
      if (!Intended(static_cast<Kind>(k), c)) unintended += all.codes[k][c];
    }
  std::printf("completed %llu calls in %.1f s (load %.1f s + drain): %.0f calls/s over the load time; client CPU %.1f s (%.0f%% of one core)\n",
              static_cast<unsigned long long>(total), wall, duration, total / duration, cpu, 100 * cpu / wall);
  std::printf("%-5s %9s %9s %9s %9s %9s %9s  %s\n", "kind", "calls", "per s", "p50", "p90", "p99", "max", "status codes");
  for (int k = 0; k < kKinds; ++k) {
    uint64_t n = 0;
    std::string codes;
    for (int c = 0; c < kCodes; ++c) {
      if (all.codes[k][c] == 0) continue;
      n += all.codes[k][c];
      absl::StrAppend(&codes, codes.empty() ? "" : " ", CodeName(c), "=", all.codes[k][c]);
    }
    if (n == 0) continue;
    std::vector<float>& v = all.latency_us[k];
    std::printf("%-5s %9llu %9.0f %9s %9s %9s %9s  %s\n", KindName(k), static_cast<unsigned long long>(n),
                n / duration, Ms(Percentile(v, 50)).c_str(), Ms(Percentile(v, 90)).c_str(),
                Ms(Percentile(v, 99)).c_str(), Ms(Percentile(v, 100)).c_str(), codes.c_str());
  }
  if (!all.ok_misses.empty()) {
    std::printf("misses answered OK: %zu (%llu joined another call's job, %llu already stored)\n",
                all.ok_misses.size(), static_cast<unsigned long long>(all.miss_joined),
                static_cast<unsigned long long>(all.miss_was_hit));
  }
  for (const std::string& m : all.samples) std::printf("unintended: %s\n", m.c_str());

  // Nothing lost: each OK miss is now a hit with the key it was answered with.
  uint64_t not_stored = 0;
  for (const auto& [constant, key] : all.ok_misses) {
    auto r = (*admin)->Lookup(GoodRequest(constant, s.elements));
    if (!r.ok() || r->plan().key() != key) {
      if (not_stored < 3) {
        std::printf("not stored: constant #%llu key %s: %s\n", static_cast<unsigned long long>(constant),
                    key.c_str(), r.ok() ? r->plan().key().c_str() : r.status().ToString().c_str());
      }
      ++not_stored;
    }
  }
  auto health = (*admin)->Health("kfuse.v1.KernelService");
  const bool serving = health.ok() && *health == kfuse::client::HealthState::kServing;
  auto after = (*admin)->Compile(s.hits[0]);
  const bool answers = after.ok() && after->cache() == v1::CACHE_OUTCOME_HIT;

  std::printf("check: lost=%d duplicate=%llu wrong_answer=%llu unintended=%llu ok_misses_not_stored=%llu/%zu server_serving=%s hit_after=%s\n",
              lost_total, static_cast<unsigned long long>(all.duplicate_completion),
              static_cast<unsigned long long>(all.wrong_answer), static_cast<unsigned long long>(unintended),
              static_cast<unsigned long long>(not_stored), all.ok_misses.size(), serving ? "yes" : "NO",
              answers ? "yes" : "NO");
  const bool pass = lost_total == 0 && all.duplicate_completion == 0 && all.wrong_answer == 0 &&
                    unintended == 0 && not_stored == 0 && serving && answers;
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
