// What the service's in-process tests share: a compiler that compiles
// nothing, a GPU that passes every candidate, a one-activation chain, a
// fresh store path per test, and a kfuse.v1 server on a loopback port with
// its stub.
#ifndef KFUSE_SERVICE_SERVICE_TEST_UTIL_H_
#define KFUSE_SERVICE_SERVICE_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kfuse/v1/kfuse.grpc.pb.h"
#include "service/pipeline.h"
#include "tuner/compiler.h"
#include "tuner/runner.h"

namespace kfuse::service_testing {

// Compiles nothing: waits `delay`, counts, returns a plausible kernel.
class FakeCompiler : public Compiler {
 public:
  explicit FakeCompiler(std::chrono::milliseconds delay = std::chrono::milliseconds(0)) : delay_(delay) {}
  absl::StatusOr<CompiledKernel> Compile(const KernelSpec& spec, const CompileOptions& opts,
                                         const std::atomic<bool>* cancel) override {
    ++calls;
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    CompiledKernel k;
    k.spec = spec;
    k.arch = opts.arch;
    k.cubin = "\x7f" "ELF-fake";
    return k;
  }
  std::string Version() const override { return "fake-1"; }
  std::atomic<int> calls{0};

 private:
  std::chrono::milliseconds delay_;
};

// Every candidate passes, each run taking `delay` (as timing on a GPU
// does); or, while `gone`, every run finds the GPU gone (Unavailable); or,
// while `wrong`, every candidate fails its check. Runs of untimed tasks
// (CheckKernel's, and TuneKernel's at other sizes) are counted apart too.
class FakeGpu : public Runner {
 public:
  explicit FakeGpu(std::chrono::milliseconds delay = std::chrono::milliseconds(0), bool gone = false)
      : gone(gone), delay_(delay) {}
  absl::StatusOr<std::vector<Trial>> Run(const CheckTask& task,
                                         const std::function<void(const Trial&)>& on_trial) override {
    ++runs;
    const bool untimed = !task.timing.flush_l2 && task.timing.repeats == 1;
    if (untimed) ++checks;
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    if (gone) return absl::UnavailableError("the GPU fell off the bus");
    std::vector<Trial> trials;
    for (size_t i = 0; i < task.candidates.size(); ++i) {
      Trial t;
      // The first candidate is the seed: the kernel answers without tuning get.
      const bool bad = wrong || (seed_wrong && i == 0) || (untimed && wrong_untimed);
      t.outcome = bad ? Outcome::kWrongResult : Outcome::kOk;
      if (bad) t.message = "y: max abs error 1 exceeds tolerance 0.001";
      t.median_seconds = 1e-5 * static_cast<double>(1 + (i * 7) % 5);
      if (on_trial) on_trial(t);
      trials.push_back(t);
    }
    return trials;
  }
  absl::StatusOr<DeviceFingerprint> Device() override { return Fingerprint(); }
  absl::StatusOr<Ceilings> MeasureCeilings(const std::atomic<bool>* /*cancel*/) override { return NominalCeilings(90); }
  static DeviceFingerprint Fingerprint() {
    DeviceFingerprint d;
    d.name = "Fake GPU";
    d.cc_major = 9;
    return d;
  }
  std::atomic<bool> gone;
  std::atomic<int> runs{0};
  std::atomic<int> checks{0};              // Untimed runs.
  std::atomic<bool> wrong{false};          // Every candidate computes the wrong answer.
  std::atomic<bool> seed_wrong{false};     // Only the seed does.
  std::atomic<bool> wrong_untimed{false};  // Every candidate of an untimed run does.

 private:
  std::chrono::milliseconds delay_;
};

// What a pipeline on `store` with `gpu` to tune on is given.
inline PipelineDeps FakeGpuDeps(Compiler* compiler, Store* store, Runner* gpu) {
  PipelineDeps deps;
  deps.compiler = compiler;
  deps.store = store;
  deps.runner = gpu;
  deps.device = FakeGpu::Fingerprint();
  deps.ceilings = NominalCeilings(90);
  return deps;
}

// activation(x * scale) over `elements` f32 values, output "y".
inline v1::CompileRequest ScaledActivation(v1::OpKind activation, double scale, int64_t elements = 4096) {
  v1::CompileRequest r;
  v1::TensorSpec* in = r.mutable_chain()->add_inputs();
  in->set_name("x");
  in->set_dtype(v1::DTYPE_F32);
  in->add_shape()->set_size(elements);
  v1::Op* c = r.mutable_chain()->add_ops();
  c->set_kind(v1::OP_CONSTANT);
  c->set_value(scale);
  v1::Op* mul = r.mutable_chain()->add_ops();
  mul->set_kind(v1::OP_MUL);
  mul->add_args()->set_input(0);
  mul->add_args()->set_op(0);
  v1::Op* act = r.mutable_chain()->add_ops();
  act->set_kind(activation);
  act->add_args()->set_op(1);
  v1::Output* out = r.mutable_chain()->add_outputs();
  out->set_name("y");
  out->mutable_value()->set_op(2);
  return r;
}

// softmax(x, axis=0) of x bf16 [n, 1000]: max, sub, exp, sum, div.
inline v1::CompileRequest ColumnSoftmax() {
  v1::CompileRequest r;
  v1::Chain* c = r.mutable_chain();
  v1::TensorSpec* in = c->add_inputs();
  in->set_name("x");
  in->set_dtype(v1::DTYPE_BF16);
  in->add_shape()->set_symbol("n");
  in->mutable_shape(0)->set_hint(4096);
  in->add_shape()->set_size(1000);
  auto op = [&](v1::OpKind kind, std::vector<int> args, bool reduce = false) {
    v1::Op* o = c->add_ops();
    o->set_kind(kind);
    for (int a : args) {
      if (a < 0) {
        o->add_args()->set_input(0);
      } else {
        o->add_args()->set_op(a);
      }
    }
    if (reduce) {
      o->mutable_reduce()->add_axes(0);
      o->mutable_reduce()->set_keepdim(true);
    }
  };
  op(v1::OP_REDUCE_MAX, {-1}, true);  // 0
  op(v1::OP_SUB, {-1, 0});            // 1
  op(v1::OP_EXP, {1});                // 2
  op(v1::OP_REDUCE_SUM, {2}, true);   // 3
  op(v1::OP_DIV, {2, 3});             // 4
  v1::Output* out = c->add_outputs();
  out->set_name("y");
  out->mutable_value()->set_op(4);
  r.mutable_policy()->set_mode(v1::TuningPolicy::MODE_HEURISTIC);
  return r;
}

// A store path unique to the running test (and `name`), removed first.
inline std::string TestStorePath(const std::string& name = "") {
  // The pid too: two checkouts' test runs share the temporary folder.
  std::string path = absl::StrCat(::testing::TempDir(), "/kfuse_service_", getpid(), "_",
                                  ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name(), "_",
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name(), name, ".db");
  std::remove(path.c_str());
  return path;
}

// What a LoopbackServer serves beside its service, as kfused's main adds
// them: a generic service for every other method, interceptors.
struct LoopbackExtras {
  grpc::CallbackGenericService* generic = nullptr;
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
};

// `service` on 127.0.0.1 (a free port) and a stub to it; shut down when
// destroyed (before the service goes: a service that drains is drained
// after).
class LoopbackServer {
 public:
  explicit LoopbackServer(grpc::Service* service, LoopbackExtras extras = {}) {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(service);
    if (extras.generic != nullptr) b.RegisterCallbackGenericService(extras.generic);
    if (!extras.interceptors.empty()) b.experimental().SetInterceptorCreators(std::move(extras.interceptors));
    server_ = b.BuildAndStart();
    EXPECT_NE(port, 0);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    stub_ = v1::KernelService::NewStub(channel_);
  }
  ~LoopbackServer() {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  v1::KernelService::Stub* stub() { return stub_.get(); }
  const std::shared_ptr<grpc::Channel>& channel() { return channel_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::KernelService::Stub> stub_;
};

}  // namespace kfuse::service_testing

#endif  // KFUSE_SERVICE_SERVICE_TEST_UTIL_H_
