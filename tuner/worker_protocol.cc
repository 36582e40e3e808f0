#include "tuner/worker_protocol.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "core/status.h"
#include "tuner/worker_wire.h"

namespace kfuse {
namespace {

constexpr int kMaxExprDepth = 256;

void PutExpr(WireWriter& w, const SizeExpr& e) {
  w.U8(static_cast<uint8_t>(e.kind()));
  if (e.kind() == SizeExpr::Kind::kConst || e.kind() == SizeExpr::Kind::kSymbol) {
    w.I64(e.value());
    return;
  }
  PutExpr(w, e.lhs());
  PutExpr(w, e.rhs());
}

SizeExpr GetExpr(WireReader& r, int depth = 0) {
  if (depth > kMaxExprDepth) {
    r.Fail("size expression nested too deeply");
    return SizeExpr::Const(0);
  }
  auto kind = static_cast<SizeExpr::Kind>(r.U8());
  using K = SizeExpr::Kind;
  switch (kind) {
    case K::kConst:
      return SizeExpr::Const(r.I64());
    case K::kSymbol: {
      int64_t i = r.I64();
      if (i < 0 || i > UINT32_MAX) r.Fail("bad symbol index");
      return SizeExpr::Symbol(static_cast<uint32_t>(i < 0 ? 0 : i));
    }
    default:
      break;
  }
  if (kind > K::kMax) {
    r.Fail("bad size expression kind");
    return SizeExpr::Const(0);
  }
  SizeExpr a = GetExpr(r, depth + 1);
  SizeExpr b = GetExpr(r, depth + 1);
  switch (kind) {
    case K::kAdd:
      return SizeExpr::Add(a, b);
    case K::kSub:
      return SizeExpr::Sub(a, b);
    case K::kMul:
      return SizeExpr::Mul(a, b);
    case K::kCeilDiv:
      return SizeExpr::CeilDiv(a, b);
    case K::kMin:
      return SizeExpr::Min(a, b);
    default:
      return SizeExpr::Max(a, b);
  }
}

void PutDim3(WireWriter& w, const Dim3Expr& d) {
  PutExpr(w, d.x);
  PutExpr(w, d.y);
  PutExpr(w, d.z);
}
Dim3Expr GetDim3(WireReader& r) {
  Dim3Expr d;
  d.x = GetExpr(r);
  d.y = GetExpr(r);
  d.z = GetExpr(r);
  return d;
}

void PutRef(WireWriter& w, const BufferRef& b) {
  w.U8(static_cast<uint8_t>(b.kind));
  w.U32(b.index);
}
BufferRef GetRef(WireReader& r) {
  BufferRef b;
  b.kind = static_cast<BufferRef::Kind>(r.U8());
  b.index = r.U32();
  return b;
}

void PutKernel(WireWriter& w, const CompiledKernel& k) {
  const KernelSpec& s = k.spec;
  w.Str(s.entry);
  w.U64(s.params.size());
  for (const KernelParam& p : s.params) {
    w.U8(static_cast<uint8_t>(p.kind));
    PutRef(w, p.buffer);
    PutExpr(w, p.value);
    w.U8(static_cast<uint8_t>(p.scalar_dtype));
    const TensorMapSpec& t = p.tensor_map;
    PutRef(w, t.buffer);
    w.U8(static_cast<uint8_t>(t.dtype));
    w.U64(t.global_dims.size());
    for (const SizeExpr& e : t.global_dims) PutExpr(w, e);
    w.U64(t.global_strides.size());
    for (const SizeExpr& e : t.global_strides) PutExpr(w, e);
    w.U64(t.box_dims.size());
    for (uint32_t b : t.box_dims) w.U32(b);
    w.I64(t.swizzle_bytes);
    PutExpr(w, p.workspace_bytes);
    w.Bool(p.workspace_zeroed);
  }
  PutDim3(w, s.grid);
  PutDim3(w, s.block);
  w.U32(s.dynamic_smem_bytes);
  w.U32(s.cluster_x);
  w.U32(s.cluster_y);
  w.U32(s.cluster_z);
  w.Str(k.arch);
  w.Str(k.cubin);
  w.Str(k.ptx);
}

CompiledKernel GetKernel(WireReader& r) {
  CompiledKernel k;
  KernelSpec& s = k.spec;
  s.entry = r.Str();
  uint64_t n = r.Count(16);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    KernelParam p;
    p.kind = static_cast<KernelParam::Kind>(r.U8());
    p.buffer = GetRef(r);
    p.value = GetExpr(r);
    p.scalar_dtype = static_cast<DType>(r.U8());
    TensorMapSpec& t = p.tensor_map;
    t.buffer = GetRef(r);
    t.dtype = static_cast<DType>(r.U8());
    for (uint64_t j = 0, m = r.Count(9); j < m && r.ok(); ++j) t.global_dims.push_back(GetExpr(r));
    for (uint64_t j = 0, m = r.Count(9); j < m && r.ok(); ++j)
      t.global_strides.push_back(GetExpr(r));
    for (uint64_t j = 0, m = r.Count(4); j < m && r.ok(); ++j) t.box_dims.push_back(r.U32());
    t.swizzle_bytes = static_cast<int>(r.I64());
    p.workspace_bytes = GetExpr(r);
    p.workspace_zeroed = r.Bool();
    s.params.push_back(std::move(p));
  }
  s.grid = GetDim3(r);
  s.block = GetDim3(r);
  s.dynamic_smem_bytes = r.U32();
  s.cluster_x = r.U32();
  s.cluster_y = r.U32();
  s.cluster_z = r.U32();
  k.arch = r.Str();
  k.cubin = r.Str();
  k.ptx = r.Str();
  return k;
}

void PutBuffers(WireWriter& w, const std::vector<BufferSpec>& v) {
  w.U64(v.size());
  for (const BufferSpec& b : v) {
    w.U8(static_cast<uint8_t>(b.dtype));
    w.I64(b.elements);
    w.U8(static_cast<uint8_t>(b.domain));
    w.Bool(b.wide_reference);
    w.I64(b.index_extent);
    w.I64(b.index_other);
  }
}

std::vector<BufferSpec> GetBuffers(WireReader& r) {
  std::vector<BufferSpec> v;
  for (uint64_t i = 0, n = r.Count(27); i < n && r.ok(); ++i) {
    BufferSpec b;
    b.dtype = static_cast<DType>(r.U8());
    b.elements = r.I64();
    b.domain = static_cast<InputDomain>(r.U8());
    b.wide_reference = r.Bool();
    b.index_extent = r.I64();
    b.index_other = r.I64();
    v.push_back(b);
  }
  return v;
}

void PutStatus(WireWriter& w, const absl::Status& s) {
  w.U32(static_cast<uint32_t>(s.code()));
  w.Str(std::string(s.message()));
}

absl::Status GetStatus(WireReader& r) {
  uint32_t raw = r.U32();
  // Codes beyond absl's range (a newer peer) read as kUnknown.
  auto code = raw <= 16 ? static_cast<absl::StatusCode>(raw) : absl::StatusCode::kUnknown;
  std::string msg = r.Str();
  return absl::Status(code, msg);
}

void PutDevice(WireWriter& w, const DeviceFingerprint& d) {
  w.Str(d.name);
  for (int v : {d.cc_major, d.cc_minor, d.sm_count, d.sm_clock_khz, d.mem_clock_khz,
                d.mem_bus_width_bits, d.power_limit_mw}) {
    w.I64(v);
  }
  w.I64(d.l2_bytes);
  w.I64(d.memory_bytes);
  w.Bool(d.ecc);
  w.Bool(d.mig);
}

DeviceFingerprint GetDevice(WireReader& r) {
  DeviceFingerprint d;
  d.name = r.Str();
  for (int* v : {&d.cc_major, &d.cc_minor, &d.sm_count, &d.sm_clock_khz, &d.mem_clock_khz,
                 &d.mem_bus_width_bits, &d.power_limit_mw}) {
    *v = static_cast<int>(r.I64());
  }
  d.l2_bytes = r.I64();
  d.memory_bytes = r.I64();
  d.ecc = r.Bool();
  d.mig = r.Bool();
  return d;
}

template <typename T>
absl::StatusOr<T> Done(WireReader& r, T value) {
  KFUSE_RETURN_IF_ERROR(r.Finish());
  return value;
}

}  // namespace

std::string EncodeRunRequest(const RunRequest& req) {
  WireWriter w;
  const CheckTask& t = req.task;
  w.U64(t.candidates.size());
  for (const CompiledKernel& k : t.candidates) PutKernel(w, k);
  PutKernel(w, t.reference64);
  PutKernel(w, t.eager);
  w.U64(t.symbol_values.size());
  for (int64_t v : t.symbol_values) w.I64(v);
  PutBuffers(w, t.inputs);
  PutBuffers(w, t.outputs);
  w.I64(t.timing.warmup);
  w.I64(t.timing.repeats);
  w.F64(t.timing.max_seconds);
  w.Bool(t.timing.flush_l2);
  w.F64(t.slack);
  w.U64(t.seed);
  w.F64(t.watchdog_seconds);
  w.I64(t.timing.min_repeats);
  w.F64(t.budget_seconds);
  w.U32(req.first_candidate);
  w.I64(req.memory_budget_bytes);
  w.F64(req.budget_left_seconds);
  return w.data();
}

absl::StatusOr<RunRequest> DecodeRunRequest(const std::string& payload) {
  WireReader r(payload);
  RunRequest req;
  CheckTask& t = req.task;
  for (uint64_t i = 0, n = r.Count(64); i < n && r.ok(); ++i) t.candidates.push_back(GetKernel(r));
  t.reference64 = GetKernel(r);
  t.eager = GetKernel(r);
  for (uint64_t i = 0, n = r.Count(8); i < n && r.ok(); ++i) t.symbol_values.push_back(r.I64());
  t.inputs = GetBuffers(r);
  t.outputs = GetBuffers(r);
  t.timing.warmup = static_cast<int>(r.I64());
  t.timing.repeats = static_cast<int>(r.I64());
  t.timing.max_seconds = r.F64();
  t.timing.flush_l2 = r.Bool();
  t.slack = r.F64();
  t.seed = r.U64();
  t.watchdog_seconds = r.F64();
  t.timing.min_repeats = static_cast<int>(r.I64());
  t.budget_seconds = r.F64();
  req.first_candidate = r.U32();
  req.memory_budget_bytes = r.I64();
  req.budget_left_seconds = r.F64();
  return Done(r, std::move(req));
}

std::string EncodeTrialResult(const TrialResult& t) {
  WireWriter w;
  w.U32(t.index);
  w.U8(static_cast<uint8_t>(t.outcome));
  w.F64(t.median_seconds);
  w.U64(t.samples_seconds.size());
  for (double s : t.samples_seconds) w.F64(s);
  w.Str(t.message);
  return w.data();
}

absl::StatusOr<TrialResult> DecodeTrialResult(const std::string& payload) {
  WireReader r(payload);
  TrialResult t;
  t.index = r.U32();
  uint8_t outcome = r.U8();
  if (outcome > static_cast<uint8_t>(Outcome::kSkipped)) r.Fail("bad outcome");
  t.outcome = static_cast<Outcome>(outcome);
  t.median_seconds = r.F64();
  for (uint64_t i = 0, n = r.Count(8); i < n && r.ok(); ++i) t.samples_seconds.push_back(r.F64());
  t.message = r.Str();
  return Done(r, std::move(t));
}

std::string EncodeStatus(const absl::Status& s) {
  WireWriter w;
  PutStatus(w, s);
  return w.data();
}

absl::StatusOr<absl::Status> DecodeStatus(const std::string& payload) {
  WireReader r(payload);
  absl::Status s = GetStatus(r);
  return Done(r, s);
}

namespace {

// A versioned hello or reply starts with this tag, then the version: an
// unversioned (version 1) reply starts with its status code, a small number.
constexpr uint32_t kVersionTag = 0x5657464bu;  // "KFWV", little-endian.

void PutVersion(WireWriter& w, uint32_t version) {
  w.U32(kVersionTag);
  w.U32(version);
}

absl::Status VersionMismatch(absl::string_view them, uint32_t version) {
  return absl::FailedPreconditionError(absl::StrCat(
      them, " speaks worker protocol ", version, ", this build ", kWorkerProtocolVersion,
      ": kfused and kfuse-worker must come from the same build"));
}

// OK where the version read is this build's; `them` says whose it is ("the
// tuning worker", "its parent"). A short payload is left to r.Finish().
absl::Status CheckVersion(WireReader& r, absl::string_view them) {
  const uint32_t tag = r.U32();
  const uint32_t version = tag == kVersionTag ? r.U32() : 1;
  if (!r.ok() || version == kWorkerProtocolVersion) return absl::OkStatus();
  return VersionMismatch(them, version);
}

}  // namespace

std::string EncodeHello(uint32_t version) {
  WireWriter w;
  PutVersion(w, version);
  return w.data();
}

absl::Status CheckHello(const std::string& payload) {
  if (payload.empty()) return VersionMismatch("its parent", 1);  // Unversioned: empty.
  WireReader r(payload);
  KFUSE_RETURN_IF_ERROR(CheckVersion(r, "its parent"));
  return r.Finish();
}

std::string EncodeHelloReply(const HelloReply& h) {
  WireWriter w;
  PutVersion(w, h.version);
  PutStatus(w, h.status);
  PutDevice(w, h.device);
  return w.data();
}

absl::StatusOr<HelloReply> DecodeHelloReply(const std::string& payload) {
  WireReader r(payload);
  KFUSE_RETURN_IF_ERROR(CheckVersion(r, "the tuning worker"));
  HelloReply h;
  h.status = GetStatus(r);
  h.device = GetDevice(r);
  return Done(r, std::move(h));
}

std::string EncodeCeilingsReply(const CeilingsReply& c) {
  WireWriter w;
  PutStatus(w, c.status);
  const Ceilings& x = c.ceilings;
  for (double v :
       {x.read_bw, x.write_bw, x.copy_bw, x.fma_flops, x.special_flops, x.tensor_flops}) {
    w.F64(v);
  }
  w.Bool(x.measured);
  w.Str(x.source);
  return w.data();
}

absl::StatusOr<CeilingsReply> DecodeCeilingsReply(const std::string& payload) {
  WireReader r(payload);
  CeilingsReply c;
  c.status = GetStatus(r);
  Ceilings& x = c.ceilings;
  for (double* v :
       {&x.read_bw, &x.write_bw, &x.copy_bw, &x.fma_flops, &x.special_flops, &x.tensor_flops}) {
    *v = r.F64();
  }
  x.measured = r.Bool();
  x.source = r.Str();
  return Done(r, std::move(c));
}

}  // namespace kfuse
