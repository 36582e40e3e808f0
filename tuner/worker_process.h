// One kfuse-worker child process and the socket to it. The parent side of
// the worker protocol: start, talk, kill, and say how the child ended.
//
//   KFUSE_ASSIGN_OR_RETURN(auto w, WorkerProcess::Start(path, /*device=*/0));
//   KFUSE_RETURN_IF_ERROR(w->Send(kMsgHello, "", /*timeout_seconds=*/60));
//   KFUSE_ASSIGN_OR_RETURN(Frame f, w->Recv(/*timeout_seconds=*/60));
#ifndef KFUSE_TUNER_WORKER_PROCESS_H_
#define KFUSE_TUNER_WORKER_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tuner/worker_wire.h"

namespace kfuse {

class WorkerProcess {
 public:
  // Spawns `path --fd=3 --device=N --parent-pid=P` with a socketpair end on
  // fd 3 (a socket, not pipes, so a dead peer never raises SIGPIPE), in a
  // process group of its own (a signal to this one's group spares it).
  // NotFound when `path` is not an executable file.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Start(const std::string& path, int device);
  ~WorkerProcess();  // Kills and reaps the child if it is still there.

  // DeadlineExceeded when the child has not taken the whole frame within
  // timeout_seconds: it is alive but not reading, and should be killed.
  absl::Status Send(uint32_t type, const std::string& payload, double timeout_seconds);
  // A frame of at most kMaxWorkerReplyBytes; a longer one is DataLoss.
  absl::StatusOr<Frame> Recv(double timeout_seconds);
  // Whether the child has written something (or closed its end) within
  // `seconds`; Recv then does not wait for the start of a frame. False on
  // a timeout, and early when a signal interrupts the wait.
  bool WaitReadable(double seconds);
  // SIGKILL, then reap. Idempotent. Waits a few seconds at most: a child
  // still not reapable then (in uninterruptible sleep in the driver) is left
  // to a thread that reaps it whenever it ends.
  void Kill();
  // After the child ended (or was killed): "exited with code 3",
  // "killed by signal 11 (Segmentation fault)". Reaps if needed.
  std::string ExitDescription();
  pid_t pid() const { return pid_; }

 private:
  enum class State {
    kRunning,
    kReaped,           // wait_status_ says how it ended.
    kReapedElsewhere,  // ECHILD: gone, its status lost (SIGCHLD ignored).
    kLeftToReaper,     // Killed, not reapable in time; a detached thread waits.
  };
  WorkerProcess(pid_t pid, int fd) : pid_(pid), fd_(fd) {}
  // Polls for the child's end for up to `wait`; true once it is no longer
  // kRunning. Never waits on a pid already known gone.
  bool Reap(std::chrono::milliseconds wait);
  pid_t pid_;
  int fd_;
  State state_ = State::kRunning;
  int wait_status_ = 0;
};

// kfuse-worker next to the running executable (/proc/self/exe), else in
// the build tree's tuner/ beside the executable's folder; the first when
// neither exists (the error then names it).
std::string DefaultWorkerPath();

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_PROCESS_H_
