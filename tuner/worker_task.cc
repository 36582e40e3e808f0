#include "tuner/worker_task.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status.h"
#include "tuner/check.h"
#include "tuner/cuda/driver.h"
#include "tuner/worker_buffers.h"
#include "tuner/worker_launch.h"

namespace kfuse {
namespace {

struct Events {
  CUevent start = nullptr, end = nullptr;
  ~Events() {
    const DriverApi* cu = *LoadDriver();
    if (start) cu->cuEventDestroy(start);
    if (end) cu->cuEventDestroy(end);
  }
};

// The outcome of one launch followed by a synchronize.
struct RunResult {
  Outcome outcome = Outcome::kOk;
  std::string message;
};

RunResult FromLaunch(CUresult r, const char* what, bool* poisoned) {
  if (r == CUDA_SUCCESS) return {};
  bool sticky = IsStickyError(r);
  *poisoned = *poisoned || sticky;
  return {sticky ? Outcome::kFault : Outcome::kLaunchError,
          std::string(CuCheck(r, what).message())};
}

// After a launch was accepted, any error at synchronization comes from the
// kernel: treat it as a fault and the context as unusable.
RunResult FromSync(CUresult r, const char* what, bool* poisoned) {
  if (r == CUDA_SUCCESS) return {};
  *poisoned = true;
  return {Outcome::kFault, std::string(CuCheck(r, what).message())};
}

RunResult LaunchAndSync(const LoadedKernel& k, BoundLaunch& l, CUstream s, bool* poisoned) {
  RunResult r = FromLaunch(LaunchOn(k, l, s), "cuLaunchKernel", poisoned);
  if (r.outcome != Outcome::kOk) return r;
  return FromSync((*LoadDriver())->cuStreamSynchronize(s), "kernel execution", poisoned);
}

absl::Status FillAll(const std::vector<DeviceBuffer>& bufs, unsigned char byte) {
  for (const DeviceBuffer& b : bufs) KFUSE_RETURN_IF_ERROR(b.Fill(byte));
  return absl::OkStatus();
}

LaunchBuffers Bind(const std::vector<DeviceBuffer>& in, const std::vector<DeviceBuffer>& out) {
  LaunchBuffers b;
  for (const DeviceBuffer& d : in) b.inputs.push_back(d.ptr());
  for (const DeviceBuffer& d : out) b.outputs.push_back(d.ptr());
  return b;
}

// Runs one of our own kernels (reference64, eager) and downloads its outputs.
// Errors are Internal: without them no candidate can be judged.
absl::StatusOr<std::vector<std::string>> RunFixed(const char* name, const CompiledKernel& k,
                                                  const CheckTask& task, const LaunchBuffers& lb,
                                                  const std::vector<DeviceBuffer>& outs,
                                                  CUstream stream, bool* poisoned) {
  auto fail = [&](const std::string& why) {
    return absl::InternalError(absl::StrCat(name, " kernel ", k.spec.entry, ": ", why));
  };
  absl::StatusOr<LoadedKernel> lk = LoadedKernel::Load(k);
  if (!lk.ok()) return fail(std::string(lk.status().message()));
  absl::StatusOr<BoundLaunch> bl = BindLaunch(k.spec, task.symbol_values, lb);
  if (!bl.ok()) return fail(std::string(bl.status().message()));
  KFUSE_RETURN_IF_ERROR(FillAll(outs, kPoisonByte));
  RunResult r = LaunchAndSync(*lk, *bl, stream, poisoned);
  if (r.outcome != Outcome::kOk) return fail(r.message);
  std::vector<std::string> host;
  for (const DeviceBuffer& b : outs) {
    KFUSE_ASSIGN_OR_RETURN(std::string h, b.Download());
    host.push_back(std::move(h));
  }
  return host;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Warm-up, then timed launches with events around the kernel only, each
// preceded by an L2 flush, until `repeats` or the time budget runs out.
RunResult Time(const LoadedKernel& k, BoundLaunch& l, const TimingOptions& opt,
               const DeviceBuffer* flush, CUstream s, const Events& ev, bool* poisoned,
               std::vector<double>* samples) {
  const DriverApi* cu = *LoadDriver();
  for (int i = 0; i < opt.warmup; ++i) {
    RunResult r = FromLaunch(LaunchOn(k, l, s), "cuLaunchKernel (warm-up)", poisoned);
    if (r.outcome != Outcome::kOk) return r;
  }
  RunResult r = FromSync(cu->cuStreamSynchronize(s), "kernel execution (warm-up)", poisoned);
  if (r.outcome != Outcome::kOk) return r;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < std::max(1, opt.repeats); ++i) {
    if (flush != nullptr) {
      r = FromLaunch(
          cu->cuMemsetD8Async(flush->ptr(), static_cast<unsigned char>(i), flush->bytes(), s),
          "cuMemsetD8Async (L2 flush)", poisoned);
      if (r.outcome != Outcome::kOk) return r;
    }
    cu->cuEventRecord(ev.start, s);
    r = FromLaunch(LaunchOn(k, l, s), "cuLaunchKernel (timed)", poisoned);
    if (r.outcome != Outcome::kOk) return r;
    cu->cuEventRecord(ev.end, s);
    r = FromSync(cu->cuEventSynchronize(ev.end), "kernel execution (timed)", poisoned);
    if (r.outcome != Outcome::kOk) return r;
    float ms = 0;
    r = FromLaunch(cu->cuEventElapsedTime(&ms, ev.start, ev.end), "cuEventElapsedTime", poisoned);
    if (r.outcome != Outcome::kOk) return r;
    samples->push_back(ms * 1e-3);
    std::chrono::duration<double> spent = std::chrono::steady_clock::now() - t0;
    if (spent.count() > opt.max_seconds) break;
  }
  return {};
}

absl::Status SkipAll(const RunRequest& req, const std::string& why, const TrialSink& send) {
  for (uint32_t i = req.first_candidate; i < req.task.candidates.size(); ++i) {
    TrialResult t;
    t.index = i;
    t.outcome = Outcome::kSkipped;
    t.message = why;
    KFUSE_RETURN_IF_ERROR(send(t));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunTaskInWorker(const RunRequest& req, const DeviceFingerprint& device,
                             CUstream stream, const ReadySink& ready, const TrialSink& send,
                             bool* poisoned) {
  const CheckTask& task = req.task;
  KFUSE_RETURN_IF_ERROR(ValidateTask(task));
  KFUSE_ASSIGN_OR_RETURN(const DriverApi* cu, LoadDriver());
  *poisoned = false;

  int64_t need = TaskDeviceBytes(task, device.l2_bytes);
  size_t free_bytes = 0, total_bytes = 0;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuMemGetInfo(&free_bytes, &total_bytes), "cuMemGetInfo"));
  if (req.memory_budget_bytes > 0 && need > req.memory_budget_bytes) {
    return SkipAll(req,
                   absl::StrCat("task needs ", need, " device bytes, over the worker's budget of ",
                                req.memory_budget_bytes),
                   send);
  }
  if (need > static_cast<int64_t>(free_bytes)) {
    return SkipAll(req,
                   absl::StrCat("task needs ", need, " device bytes; only ", free_bytes,
                                " are free on the GPU"),
                   send);
  }

  std::vector<DeviceBuffer> inputs, ref_outs, outs;
  for (size_t i = 0; i < task.inputs.size(); ++i) {
    const BufferSpec& b = task.inputs[i];
    KFUSE_ASSIGN_OR_RETURN(DeviceBuffer d, DeviceBuffer::Alloc(b.elements * DTypeBytes(b.dtype)));
    KFUSE_RETURN_IF_ERROR(d.Upload(RandomInput(b, task.seed, i)));
    inputs.push_back(std::move(d));
  }
  for (const BufferSpec& b : task.outputs) {
    KFUSE_ASSIGN_OR_RETURN(DeviceBuffer r, DeviceBuffer::Alloc(b.elements * 8));
    ref_outs.push_back(std::move(r));
    KFUSE_ASSIGN_OR_RETURN(DeviceBuffer o, DeviceBuffer::Alloc(b.elements * DTypeBytes(b.dtype)));
    outs.push_back(std::move(o));
  }
  const LaunchBuffers ref_lb = Bind(inputs, ref_outs), lb = Bind(inputs, outs);

  KFUSE_ASSIGN_OR_RETURN(
      std::vector<std::string> ref_host,
      RunFixed("reference64", task.reference64, task, ref_lb, ref_outs, stream, poisoned));
  KFUSE_ASSIGN_OR_RETURN(std::vector<std::string> eager_host,
                         RunFixed("eager", task.eager, task, lb, outs, stream, poisoned));
  // Per output: the reference, and eager's error against it. Where eager's
  // rounding made an inf or NaN the f64 reference does not have (or the
  // reverse), candidates are held to eager's value instead.
  std::vector<std::vector<double>> refs;
  std::vector<double> eager_err;
  for (size_t j = 0; j < task.outputs.size(); ++j) {
    DType dt = task.outputs[j].dtype;
    std::vector<double> ref = ToDouble(DType::kF64, ref_host[j].data(), task.outputs[j].elements);
    int64_t first = -1;
    // f64 poison is a NaN, which a NaN reference would hide from
    // CountUnwritten: count all-0xFF elements directly.
    int64_t unwritten = 0;
    for (int64_t i = 0; i < task.outputs[j].elements; ++i) {
      const auto* p = reinterpret_cast<const unsigned char*>(ref_host[j].data()) + 8 * i;
      bool all = true;
      for (int b = 0; b < 8; ++b) all = all && p[b] == kPoisonByte;
      unwritten += all;
    }
    if (unwritten > 0) {
      return absl::InternalError(absl::StrCat("reference64 kernel left ", unwritten,
                                              " elements of output ", j, " unwritten"));
    }
    if (int64_t n = CountUnwritten(dt, eager_host[j].data(), ref, &first); n > 0) {
      return absl::InternalError(absl::StrCat("eager kernel left ", n, " elements of output ", j,
                                              " unwritten (first at ", first, ")"));
    }
    std::vector<double> eager = ToDouble(dt, eager_host[j].data(), task.outputs[j].elements);
    for (size_t i = 0; i < ref.size(); ++i) {
      bool special = !std::isfinite(ref[i]) || !std::isfinite(eager[i]);
      bool same = (std::isnan(ref[i]) && std::isnan(eager[i])) || ref[i] == eager[i];
      if (special && !same) ref[i] = eager[i];
    }
    eager_err.push_back(CompareToReference(dt, eager_host[j].data(), ref).max_abs_err);
    refs.push_back(std::move(ref));
  }

  DeviceBuffer flush;
  if (task.timing.flush_l2) {
    KFUSE_ASSIGN_OR_RETURN(flush,
                           DeviceBuffer::Alloc(std::max<int64_t>(2 * device.l2_bytes, 1 << 20)));
  }
  Events ev;
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventCreate(&ev.start, CU_EVENT_DEFAULT), "cuEventCreate"));
  KFUSE_RETURN_IF_ERROR(CuCheck(cu->cuEventCreate(&ev.end, CU_EVENT_DEFAULT), "cuEventCreate"));

  KFUSE_RETURN_IF_ERROR(ready());
  for (uint32_t idx = req.first_candidate; idx < task.candidates.size(); ++idx) {
    const CompiledKernel& k = task.candidates[idx];
    TrialResult t;
    t.index = idx;
    absl::StatusOr<LoadedKernel> lk = LoadedKernel::Load(k);
    absl::StatusOr<BoundLaunch> bl = lk.ok() ? BindLaunch(k.spec, task.symbol_values, lb)
                                             : absl::StatusOr<BoundLaunch>(lk.status());
    if (!bl.ok()) {
      t.outcome = Outcome::kLaunchError;
      t.message = std::string(bl.status().message());
      KFUSE_RETURN_IF_ERROR(send(t));
      continue;
    }
    KFUSE_RETURN_IF_ERROR(FillAll(outs, kPoisonByte));
    RunResult r = LaunchAndSync(*lk, *bl, stream, poisoned);
    std::vector<std::string> notes;
    if (r.outcome == Outcome::kOk) {
      for (size_t j = 0; j < outs.size() && r.outcome == Outcome::kOk; ++j) {
        KFUSE_ASSIGN_OR_RETURN(std::string got, outs[j].Download());
        OutputCheck c = CheckOutput(task.outputs[j].dtype, got.data(), refs[j], eager_err[j],
                                    task.slack, absl::StrCat("output ", j));
        if (!c.ok) r = {Outcome::kWrongResult, c.message};
        notes.push_back(c.message);
      }
    }
    if (r.outcome == Outcome::kOk) {
      r = Time(*lk, *bl, task.timing, task.timing.flush_l2 ? &flush : nullptr, stream, ev, poisoned,
               &t.samples_seconds);
      t.median_seconds = Median(t.samples_seconds);
    }
    t.outcome = r.outcome;
    t.message = r.outcome == Outcome::kOk ? absl::StrJoin(notes, "; ") : r.message;
    KFUSE_RETURN_IF_ERROR(send(t));
    if (*poisoned) return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace kfuse
