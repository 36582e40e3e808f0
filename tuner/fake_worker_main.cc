// kfuse-fake-worker: a tuning worker that misbehaves on purpose, for the
// runner's tests only (never installed).
//
// Without $KFUSE_FAKE_WORKER_MODE it answers one hello as a worker speaking
// protocol $KFUSE_FAKE_WORKER_VERSION would ("1": unversioned, the reply
// starting with its status), then waits for its parent to close the socket.
// With a mode it answers hello as a worker with a GPU, answers ceilings, and
// does this with each task:
//   ok           kReady, one kOk trial per candidate, kTaskDone
//   extra_trial  as ok, with a trial past the last candidate before kTaskDone
//   huge_frame   kReady, then a frame header claiming 1 GiB, and nothing more
//   bad_magic    kReady, then 16 bytes that are not a frame
//   exit7        kReady, then exits with code 7
//   slow         kReady, then 30 s before its trials (a candidate still on
//                the GPU)
//   cancellable  kReady, then each candidate takes 200 ms; a kCancel ends
//                the task there with kTaskDone Cancelled
//   late_cancel  as ok after 500 ms: a kCancel sent meanwhile is read once
//                the task is done (and ignored, as the worker does)
//   cancel_fails as cancellable, but a kCancel ends the task with kTaskDone
//                Internal (as after a fault), and the worker, on its way
//                out, exits at the next message without answering it
// or, instead of tasks:
//   no_gpu       answers hello Unavailable, as a worker whose GPU is gone
//   broken_gpu   answers hello Internal, as a worker whose driver call failed
//   deaf         stops reading after hello (and exits 30 s later)
//   traced       as ok, but traced by a child of its own that never waits for
//                it, so once killed it cannot be reaped for 10 s; hello says
//                Unavailable where ptrace is refused
//   slow_ceilings  as ok, but answers ceilings 30 s after the request, once
//                it has created the file $KFUSE_FAKE_WORKER_MARK (if set), so
//                a test knows the measurement is under way
//   slow_hello   as ok, but answers hello 30 s after it came (a driver slow
//                to initialise), once it has written its process id to
//                $KFUSE_FAKE_WORKER_MARK (if set)
//
// $KFUSE_FAKE_WORKER_MODE_<N>, where set, is the mode of the worker for
// --device=N instead.
//
//   kfuse-fake-worker --fd=3 --device=0 --parent-pid=1234
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "tuner/worker_protocol.h"
#include "tuner/worker_wire.h"

namespace kfuse {
namespace {

bool Send(int fd, uint32_t type, const std::string& payload) {
  return SendFrame(fd, type, payload, /*timeout_seconds=*/-1).ok();
}

// A worker of another protocol version, with no GPU.
int AnswerHelloAsVersion(int fd, uint32_t version) {
  absl::StatusOr<Frame> hello = RecvFrame(fd, 10.0, kMaxFrameBytes);
  if (!hello.ok() || hello->type != kMsgHello) return 2;
  HelloReply reply;
  reply.version = version;
  reply.status = absl::UnavailableError("a fake worker has no GPU");
  std::string payload = EncodeHelloReply(reply);
  if (version == 1) payload = payload.substr(8);  // No tag, no version.
  if (!Send(fd, kMsgHelloReply, payload)) return 2;
  while (RecvFrame(fd, -1, kMaxFrameBytes).ok()) {
  }
  return 0;
}

// Has a child process trace this one and never wait for it: a killed tracee
// is a zombie only its tracer can reap, so the parent's waitpid does not see
// it until the tracer exits, `seconds` later (as with a worker stuck in the
// driver). False where ptrace is refused.
bool HideExitFromParent(int fd, int seconds) {
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY);  // Where Yama limits ptrace.
  int ready[2];
  if (pipe(ready) != 0) return false;
  const pid_t traced = getpid();
  const pid_t tracer = fork();
  if (tracer < 0) return false;
  if (tracer == 0) {
    close(fd);  // So the parent sees the socket close when the worker dies.
    const char ok = ptrace(PTRACE_SEIZE, traced, nullptr, nullptr) == 0 ? 1 : 0;
    if (write(ready[1], &ok, 1) != 1) _exit(2);
    sleep(seconds);
    _exit(0);
  }
  char ok = 0;
  return read(ready[0], &ok, 1) == 1 && ok == 1;
}

int Serve(int fd, const std::string& mode) {
  absl::StatusOr<Frame> hello = RecvFrame(fd, 10.0, kMaxFrameBytes);
  if (!hello.ok() || hello->type != kMsgHello) return 2;
  if (mode == "slow_hello") {
    if (const char* mark = std::getenv("KFUSE_FAKE_WORKER_MARK")) {
      const std::string pid = std::to_string(getpid());
      const std::string tmp = std::string(mark) + ".tmp";  // Whole, or not there.
      const int out = creat(tmp.c_str(), 0600);
      if (out < 0 || write(out, pid.data(), pid.size()) != static_cast<ssize_t>(pid.size())) return 2;
      close(out);
      if (rename(tmp.c_str(), mark) != 0) return 2;
    }
    sleep(30);
  }
  HelloReply reply;
  reply.device.name = "kfuse-fake-worker";
  if (mode == "traced" && !HideExitFromParent(fd, 10)) {
    reply.status = absl::UnavailableError("ptrace refused");
  }
  if (mode == "no_gpu") reply.status = absl::UnavailableError("no usable GPU (fake)");
  if (mode == "broken_gpu") reply.status = absl::InternalError("cuDevicePrimaryCtxRetain failed (fake)");
  if (!Send(fd, kMsgHelloReply, EncodeHelloReply(reply))) return 2;
  if (mode == "deaf") {
    sleep(30);
    return 0;
  }
  while (true) {
    absl::StatusOr<Frame> f = RecvFrame(fd, -1, kMaxFrameBytes);
    if (!f.ok()) return 0;  // Parent gone.
    if (f->type == kMsgCeilings) {
      if (mode == "slow_ceilings") {
        if (const char* mark = std::getenv("KFUSE_FAKE_WORKER_MARK")) close(creat(mark, 0600));
        sleep(30);
      }
      CeilingsReply c;
      c.ceilings.source = "kfuse-fake-worker";
      if (!Send(fd, kMsgCeilingsReply, EncodeCeilingsReply(c))) return 0;
      continue;
    }
    if (f->type == kMsgCancel) continue;  // Its task was done before it came.
    if (f->type != kMsgRun) return 2;
    absl::StatusOr<RunRequest> req = DecodeRunRequest(f->payload);
    if (!req.ok()) return 2;
    if (!Send(fd, kMsgReady, "")) return 0;
    if (mode == "exit7") _exit(7);
    if (mode == "slow") sleep(30);
    if (mode == "huge_frame" || mode == "bad_magic") {
      WireWriter w;
      w.U32(mode == "huge_frame" ? 0x3157464B : 0x21212121);  // worker_wire.cc's "KFW1" or not.
      w.U32(kMsgTrial);
      w.U64(uint64_t{1} << 30);
      if (write(fd, w.data().data(), w.data().size()) != 16) return 2;
      while (RecvFrame(fd, -1, kMaxFrameBytes).ok()) {
      }
      return 0;
    }
    if (mode == "late_cancel") usleep(500'000);
    uint32_t end = static_cast<uint32_t>(req->task.candidates.size());
    if (mode == "extra_trial") ++end;
    bool cancelled = false;
    for (uint32_t i = req->first_candidate; i < end && !cancelled; ++i) {
      if (mode == "cancellable" || mode == "cancel_fails") {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 200) > 0) {
          absl::StatusOr<Frame> c = RecvFrame(fd, 5.0, kMaxFrameBytes);
          if (!c.ok() || c->type != kMsgCancel) return 2;
          cancelled = true;
          break;
        }
      }
      TrialResult t;
      t.index = i;
      t.outcome = Outcome::kOk;
      t.median_seconds = 1e-6;
      if (!Send(fd, kMsgTrial, EncodeTrialResult(t))) return 0;
    }
    absl::Status done = cancelled ? absl::CancelledError("the task was cancelled") : absl::OkStatus();
    if (cancelled && mode == "cancel_fails") done = absl::InternalError("eager kernel faulted (fake)");
    if (!Send(fd, kMsgTaskDone, EncodeStatus(done))) return 0;
    if (cancelled && mode == "cancel_fails") {
      (void)RecvFrame(fd, 10.0, kMaxFrameBytes);
      _exit(3);
    }
  }
}

}  // namespace
}  // namespace kfuse

int main(int argc, char** argv) {
  int fd = -1;
  const char* device = "0";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fd=", 5) == 0 && !absl::SimpleAtoi(argv[i] + 5, &fd)) return 2;
    if (std::strncmp(argv[i], "--device=", 9) == 0) device = argv[i] + 9;
  }
  uint32_t version = kfuse::kWorkerProtocolVersion;
  const char* v = std::getenv("KFUSE_FAKE_WORKER_VERSION");
  if (fd < 0 || (v != nullptr && !absl::SimpleAtoi(v, &version))) return 2;
  const char* mode = std::getenv((std::string("KFUSE_FAKE_WORKER_MODE_") + device).c_str());
  if (mode == nullptr) mode = std::getenv("KFUSE_FAKE_WORKER_MODE");
  return mode == nullptr ? kfuse::AnswerHelloAsVersion(fd, version) : kfuse::Serve(fd, mode);
}
