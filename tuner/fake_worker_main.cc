// kfuse-fake-worker: a tuning worker of another build, for the runner's tests
// only (never installed). It answers one hello as a worker speaking protocol
// $KFUSE_FAKE_WORKER_VERSION would ("1": unversioned, the reply starting with
// its status), then waits for its parent to close the socket.
//
//   kfuse-fake-worker --fd=3 --device=0 --parent-pid=1234
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "tuner/worker_protocol.h"
#include "tuner/worker_wire.h"

int main(int argc, char** argv) {
  int fd = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fd=", 5) == 0 && !absl::SimpleAtoi(argv[i] + 5, &fd)) return 2;
  }
  uint32_t version = kfuse::kWorkerProtocolVersion;
  const char* v = std::getenv("KFUSE_FAKE_WORKER_VERSION");
  if (fd < 0 || (v != nullptr && !absl::SimpleAtoi(v, &version))) return 2;
  absl::StatusOr<kfuse::Frame> hello = kfuse::RecvFrame(fd, 10.0);
  if (!hello.ok() || hello->type != kfuse::kMsgHello) return 2;
  kfuse::HelloReply reply;
  reply.version = version;
  reply.status = absl::UnavailableError("a fake worker has no GPU");
  std::string payload = kfuse::EncodeHelloReply(reply);
  if (version == 1) payload = payload.substr(8);  // No tag, no version.
  if (!kfuse::SendFrame(fd, kfuse::kMsgHelloReply, payload).ok()) return 2;
  while (kfuse::RecvFrame(fd, -1).ok()) {
  }
  return 0;
}
