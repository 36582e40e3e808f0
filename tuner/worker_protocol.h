// The messages between WorkerRunner and kfuse-worker, and their encoding.
// One request at a time; the worker answers a RunRequest with one TrialResult
// per candidate (so the parent always knows which candidate was running when
// the worker died or hung) and then a TaskDone.
//
//   parent                      worker
//   kHello {version}  ->        <- kHelloReply {version, status, fingerprint}
//   kRun {task, first, budget}  <- kReady, kTrial {index, ...} x N, kTaskDone {status}
//                               (kTaskDone Aborted: a kernel faulted, the worker exits)
//   kCancel (during a kRun)     the worker stops before its next candidate:
//                               <- kTaskDone Cancelled (a kCancel that arrives
//                               after its task's kTaskDone is ignored)
//   kCeilings         ->        <- kCeilingsReply {status, ceilings}
//
//   KFUSE_RETURN_IF_ERROR(SendFrame(fd, kMsgRun, EncodeRunRequest(req)));
//
// kfused and kfuse-worker are built and shipped together, but a fleet's
// rollout can leave one beside the other's older build: the hello carries
// each side's protocol version, and a mismatch stops the worker's start with
// FailedPrecondition naming both, before any task is misread.
#ifndef KFUSE_TUNER_WORKER_PROTOCOL_H_
#define KFUSE_TUNER_WORKER_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/roofline.h"
#include "core/trial.h"
#include "tuner/runner.h"

namespace kfuse {

enum WorkerMsg : uint32_t {
  kMsgHello = 1,
  kMsgHelloReply = 2,
  kMsgRun = 3,
  kMsgTrial = 4,
  kMsgTaskDone = 5,
  kMsgCeilings = 6,
  kMsgCeilingsReply = 7,
  kMsgReady = 8,  // Worker: inputs made, references run; candidates follow.
  kMsgCancel = 9,  // Parent: no caller waits for the task in progress.
};

// The encoding of every message below. Bump it with any change to one;
// WorkerProtocolTest.EncodingsMatchTheVersion fails until it is.
// 1: unversioned; 3: index domains; 4: kCancel.
inline constexpr uint32_t kWorkerProtocolVersion = 4;

// The longest frame the parent takes from a worker. The longest a worker
// sends is a TrialResult of 10,000 samples (the most repeats ValidateTask
// allows: 80 KB) with a message of a few KB; a header claiming more is a
// corrupt stream, refused before anything is allocated for it.
inline constexpr uint64_t kMaxWorkerReplyBytes = uint64_t{4} << 20;

// The message of a candidate skipped because CheckTask::budget_seconds ran out.
inline constexpr char kBudgetSpentMessage[] = "tuning budget spent before this candidate started";

struct RunRequest {
  CheckTask task;
  uint32_t first_candidate = 0;  // Candidates before this were already run.
  int64_t memory_budget_bytes = 0;
  // What is left of task.budget_seconds when this request is sent (a
  // restarted worker gets less); < 0: no limit.
  double budget_left_seconds = -1;
};

// What the worker measures for one candidate; the parent adds the variant,
// compile time and resources from the CompiledKernel.
struct TrialResult {
  uint32_t index = 0;
  Outcome outcome = Outcome::kUnknown;
  double median_seconds = 0;
  std::vector<double> samples_seconds;
  std::string message;
};

struct HelloReply {
  uint32_t version = kWorkerProtocolVersion;  // The worker's.
  absl::Status status;  // Unavailable: no GPU; the fingerprint is then empty.
  DeviceFingerprint device;
};

struct CeilingsReply {
  absl::Status status;
  Ceilings ceilings;
};

std::string EncodeRunRequest(const RunRequest& r);
absl::StatusOr<RunRequest> DecodeRunRequest(const std::string& payload);
std::string EncodeTrialResult(const TrialResult& t);
absl::StatusOr<TrialResult> DecodeTrialResult(const std::string& payload);
std::string EncodeStatus(const absl::Status& s);  // kMsgTaskDone.
absl::StatusOr<absl::Status> DecodeStatus(const std::string& payload);
// kMsgHello: the parent's version. Decoding checks it against this build's:
// FailedPrecondition naming both where they differ.
std::string EncodeHello(uint32_t version = kWorkerProtocolVersion);
absl::Status CheckHello(const std::string& payload);
std::string EncodeHelloReply(const HelloReply& h);
// FailedPrecondition where the worker's version is not this build's (an
// unversioned worker's reply included); the message names both.
absl::StatusOr<HelloReply> DecodeHelloReply(const std::string& payload);
std::string EncodeCeilingsReply(const CeilingsReply& c);
absl::StatusOr<CeilingsReply> DecodeCeilingsReply(const std::string& payload);

}  // namespace kfuse

#endif  // KFUSE_TUNER_WORKER_PROTOCOL_H_
