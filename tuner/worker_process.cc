#include "tuner/worker_process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tuner/worker_protocol.h"

extern char** environ;

namespace kfuse {

std::string DefaultWorkerPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "kfuse-worker";
  std::string self(buf, static_cast<size_t>(n));
  size_t slash = self.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : self.substr(0, slash);
  const std::string beside = dir + "/kfuse-worker";
  if (access(beside.c_str(), X_OK) == 0) return beside;
  const std::string in_build = dir + "/../tuner/kfuse-worker";  // kfused, kfuse in a build tree.
  return access(in_build.c_str(), X_OK) == 0 ? in_build : beside;
}

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(const std::string& path,
                                                                    int device) {
  if (access(path.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("tuning worker ", path, " is not an executable file (",
                                            std::strerror(errno), "); build kfuse-worker"));
  }
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  // dup2 onto 3 clears close-on-exec for the child's copy only.
  posix_spawn_file_actions_adddup2(&fa, fds[1], 3);
  std::vector<std::string> args = {path, "--fd=3", absl::StrCat("--device=", device),
                                   absl::StrCat("--parent-pid=", getpid())};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  // kfused blocks SIGTERM and SIGINT for sigwait; the worker must not
  // inherit that mask, or it could not be stopped. It runs in a process
  // group of its own, so a terminal's Ctrl-C (SIGINT to the foreground
  // group) stops kfused, which lets the tasks in flight finish within its
  // grace, and not the workers under them; they end with kfused.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  int rc = posix_spawn(&pid, path.c_str(), &fa, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("posix_spawn ", path, ": ", std::strerror(rc)));
  }
  return std::unique_ptr<WorkerProcess>(new WorkerProcess(pid, fds[0]));
}

WorkerProcess::~WorkerProcess() {
  Kill();
  close(fd_);
}

absl::Status WorkerProcess::Send(uint32_t type, const std::string& payload,
                                 double timeout_seconds) {
  return SendFrame(fd_, type, payload, timeout_seconds);
}

absl::StatusOr<Frame> WorkerProcess::Recv(double timeout_seconds) {
  return RecvFrame(fd_, timeout_seconds, kMaxWorkerReplyBytes);
}

bool WorkerProcess::WaitReadable(double seconds) {
  pollfd pfd{fd_, POLLIN, 0};
  const int r = poll(&pfd, 1, static_cast<int>(seconds * 1000));
  // Readable, closed, or an error Recv reports; a signal is only a wake-up.
  return r > 0 || (r < 0 && errno != EINTR);
}

bool WorkerProcess::Reap(std::chrono::milliseconds wait) {
  const auto end = std::chrono::steady_clock::now() + wait;
  while (state_ == State::kRunning) {
    pid_t r = waitpid(pid_, &wait_status_, WNOHANG);
    if (r == pid_) {
      state_ = State::kReaped;
    } else if (r < 0 && errno == ECHILD) {
      // Reaped by the kernel (SIGCHLD inherited as ignored): its pid may be
      // another process's by now, so it is never signalled again.
      state_ = State::kReapedElsewhere;
    } else if (std::chrono::steady_clock::now() >= end) {
      return false;
    } else if (r != -1 || errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return true;
}

void WorkerProcess::Kill() {
  // Gone already (reaped by the kernel, if SIGCHLD is ignored): its pid may
  // be reused, so it must not be signalled.
  if (Reap(std::chrono::milliseconds(0))) return;
  kill(pid_, SIGKILL);
  if (Reap(std::chrono::seconds(3))) return;
  // Not reapable yet: a child in uninterruptible sleep in the driver ends
  // only when the driver lets go. Callers hold the runner's lock; reap it on
  // a thread of its own rather than make them wait for that.
  std::thread([pid = pid_] {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }).detach();
  state_ = State::kLeftToReaper;
}

std::string WorkerProcess::ExitDescription() {
  // The child closed its end; give it a moment to finish exiting before
  // forcing it, so a clean exit code is not reported as our SIGKILL.
  if (!Reap(std::chrono::seconds(2))) Kill();
  if (state_ == State::kLeftToReaper) return "killed, and not reapable yet (stuck in the driver?)";
  if (state_ == State::kReapedElsewhere) {
    return "ended (its exit status is lost: SIGCHLD is ignored in this process)";
  }
  if (WIFEXITED(wait_status_)) return absl::StrCat("exited with code ", WEXITSTATUS(wait_status_));
  if (WIFSIGNALED(wait_status_)) {
    int sig = WTERMSIG(wait_status_);
    return absl::StrCat("killed by signal ", sig, " (", strsignal(sig), ")");
  }
  return "ended";
}

}  // namespace kfuse
