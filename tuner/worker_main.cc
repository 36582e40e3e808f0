// kfuse-worker: runs candidate kernels for WorkerRunner (tuner/runner.h) in a
// process of its own, so a kernel that faults or hangs costs only this
// process. Speaks the protocol of tuner/worker_protocol.h on the socket at
// --fd; started by WorkerRunner, never by hand:
//
//   kfuse-worker --fd=3 --device=0 --parent-pid=1234
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/status.h"
#include "tuner/ceilings.h"
#include "tuner/cuda/device.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_kernels.h"
#include "tuner/worker_protocol.h"
#include "tuner/worker_task.h"
#include "tuner/worker_wire.h"

namespace kfuse {
namespace {

struct Args {
  int fd = -1, device = 0;
  long parent = 0;
};

bool ParseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const char* flag) -> const char* {
      size_t n = std::strlen(flag);
      return s.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--fd=")) {
      if (!absl::SimpleAtoi(v, &a->fd)) return false;
    } else if (const char* v = value("--device=")) {
      if (!absl::SimpleAtoi(v, &a->device)) return false;
    } else if (const char* v = value("--parent-pid=")) {
      if (!absl::SimpleAtoi(v, &a->parent)) return false;
    } else {
      return false;
    }
  }
  return a->fd >= 0;
}

// The GPU state of this process, made on kHello. Members are destroyed in
// reverse: the helper kernels before the context.
struct Gpu {
  DeviceFingerprint device;
  std::optional<ScopedPrimaryContext> ctx;
  CUstream stream = nullptr;
  // Compiled on kHello (NVRTC, a few hundred ms), not in a task's budget.
  absl::StatusOr<std::unique_ptr<WorkerKernels>> kernels =
      absl::FailedPreconditionError("no hello yet");
};

absl::Status Init(int ordinal, Gpu* gpu) {
  KFUSE_ASSIGN_OR_RETURN(gpu->device, QueryDevice(ordinal));
  KFUSE_ASSIGN_OR_RETURN(ScopedPrimaryContext ctx, ScopedPrimaryContext::Create(ordinal));
  gpu->ctx.emplace(std::move(ctx));
  const DriverApi* cu = *LoadDriver();
  // A blocking stream (flags 0): it stays ordered with the legacy stream,
  // which the synchronous copies and memsets (DeviceBuffer::Upload, Fill,
  // Download) use. With CU_STREAM_NON_BLOCKING a poison memset of a large
  // output could land after the kernel that wrote it.
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuStreamCreate(&gpu->stream, 0), "cuStreamCreate"));
  // A failure here is reported by each task (tuning needs the helpers), not
  // by hello: the device itself is fine, and ceilings still work.
  gpu->kernels = WorkerKernels::Create(ArchForDevice(gpu->device));
  return absl::OkStatus();
}

// Whether the parent asked, while a task runs, for it to stop: a kCancel
// waiting on the socket. The parent gone (or the socket unreadable) stops
// the task too: its reply then fails and the worker leaves. Any other
// message during a task means the two are out of step: the worker exits, as
// it does for a message it does not know.
bool CancelRequested(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & POLLIN) == 0) return true;  // Hung up or in error.
  absl::StatusOr<Frame> f = RecvFrame(fd, /*timeout_seconds=*/5, kMaxFrameBytes);
  if (f.ok() && f->type != kMsgCancel) {
    std::fprintf(stderr, "kfuse-worker: message type %u during a task\n", f->type);
    std::fflush(stderr);
    _exit(2);
  }
  return true;
}

int Serve(const Args& args) {
  // A reply waits for the parent as long as it takes: the parent reads while
  // a request is out, and kills a worker that does not answer in time.
  auto reply = [&](uint32_t type, const std::string& payload) {
    return SendFrame(args.fd, type, payload, /*timeout_seconds=*/-1);
  };
  Gpu gpu;
  absl::Status init = absl::FailedPreconditionError("no hello yet");
  while (true) {
    absl::StatusOr<Frame> f = RecvFrame(args.fd, -1, kMaxFrameBytes);
    if (!f.ok())
      return f.status().code() == absl::StatusCode::kUnavailable ? 0 : 2;  // Parent gone.
    absl::Status sent;
    switch (f->type) {
      case kMsgHello: {
        // A parent of another build is told so (it reads the reply's version
        // first) and keeps the GPU untouched.
        const absl::Status version = CheckHello(f->payload);
        if (version.ok() && !gpu.ctx) init = Init(args.device, &gpu);
        const absl::Status& s = version.ok() ? init : version;
        HelloReply h{kWorkerProtocolVersion, s, s.ok() ? gpu.device : DeviceFingerprint{}};
        sent = reply(kMsgHelloReply, EncodeHelloReply(h));
        break;
      }
      case kMsgRun: {
        absl::StatusOr<RunRequest> req = DecodeRunRequest(f->payload);
        bool poisoned = false;
        absl::Status s = !req.ok() ? req.status() : init;
        if (s.ok() && !gpu.kernels.ok()) s = gpu.kernels.status();
        if (s.ok()) {
          s = RunTaskInWorker(
              *req, gpu.device, **gpu.kernels, gpu.stream, [&] { return reply(kMsgReady, ""); },
              [&](const TrialResult& t) { return reply(kMsgTrial, EncodeTrialResult(t)); },
              &poisoned, [&] { return CancelRequested(args.fd); });
        }
        if (poisoned) {
          // The context is unusable for good: say so, then leave without
          // running CUDA teardown on a broken context.
          absl::Status done = absl::AbortedError(
              absl::StrCat("a kernel faulted; the worker exits", s.ok() ? "" : ": ", s.message()));
          if (!s.ok() && s.code() != absl::StatusCode::kAborted) done = s;
          reply(kMsgTaskDone, EncodeStatus(done)).IgnoreError();
          std::fflush(stderr);
          _exit(3);
        }
        sent = reply(kMsgTaskDone, EncodeStatus(s));
        break;
      }
      case kMsgCeilings: {
        CeilingsReply c;
        c.status = init;
        if (init.ok()) {
          absl::StatusOr<Ceilings> m = MeasureCeilingsOnDevice(gpu.device, gpu.stream);
          c.status = m.status();
          if (m.ok()) c.ceilings = *m;
        }
        sent = reply(kMsgCeilingsReply, EncodeCeilingsReply(c));
        break;
      }
      case kMsgCancel:
        break;  // Its task had ended before it came: nothing to stop.
      default:
        std::fprintf(stderr, "kfuse-worker: unknown message type %u\n", f->type);
        return 2;
    }
    if (!sent.ok()) return 0;  // Parent gone.
  }
}

}  // namespace
}  // namespace kfuse

int main(int argc, char** argv) {
  kfuse::Args args;
  if (!kfuse::ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "kfuse-worker is started by the kfuse tuner (WorkerRunner), not by hand.\n"
                 "usage: kfuse-worker --fd=N [--device=N] [--parent-pid=N]\n");
    return 2;
  }
  // Die with the parent even while a kernel runs. Not PR_SET_PDEATHSIG: it
  // fires when the spawning *thread* exits, and the service spawns from
  // pool threads. A dead parent's socket gives EPIPE, not a signal.
  if (args.parent != 0) {
    if (getppid() != args.parent) return 0;
    std::thread([parent = args.parent] {
      while (getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(500));
      _exit(0);
    }).detach();
  }
  signal(SIGPIPE, SIG_IGN);
  return kfuse::Serve(args);
}
