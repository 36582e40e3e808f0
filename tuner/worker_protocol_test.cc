#include "tuner/worker_protocol.h"

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "tuner/worker_wire.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

CompiledKernel Kernel(const std::string& entry) {
  CompiledKernel k;
  k.spec.entry = entry;
  k.spec.params.push_back(KernelParam::Buffer({BufferRef::Kind::kInput, 1}));
  k.spec.params.push_back(KernelParam::Buffer({BufferRef::Kind::kOutput, 0}));
  k.spec.params.push_back(KernelParam::Scalar(
      SizeExpr::Max(SizeExpr::Symbol(0), SizeExpr::Sub(SizeExpr::Const(7), SizeExpr::Symbol(1))),
      DType::kI32));
  KernelParam ws;
  ws.kind = KernelParam::Kind::kWorkspace;
  ws.workspace_bytes = SizeExpr::Mul(SizeExpr::Symbol(0), SizeExpr::Const(4));
  ws.workspace_zeroed = true;
  k.spec.params.push_back(ws);
  KernelParam tm;
  tm.kind = KernelParam::Kind::kTensorMap;
  tm.tensor_map.buffer = {BufferRef::Kind::kInput, 0};
  tm.tensor_map.dtype = DType::kBF16;
  tm.tensor_map.global_dims = {SizeExpr::Symbol(0), SizeExpr::Const(64)};
  tm.tensor_map.global_strides = {SizeExpr::Const(128)};
  tm.tensor_map.box_dims = {64, 64};
  tm.tensor_map.swizzle_bytes = 128;
  k.spec.params.push_back(tm);
  k.spec.grid.x = SizeExpr::CeilDiv(SizeExpr::Symbol(0), SizeExpr::Const(256));
  k.spec.grid.z = SizeExpr::Min(SizeExpr::Symbol(1), SizeExpr::Const(3));
  k.spec.block.x = SizeExpr::Const(256);
  k.spec.dynamic_smem_bytes = 99 * 1024;
  k.spec.cluster_x = 2;
  k.spec.cluster_y = 1;
  k.arch = "sm_90a";
  k.cubin = std::string(
      "\x7f"
      "ELF\0\1\2",
      7);
  k.ptx = ".version 8.0";
  return k;
}

void ExpectSameKernel(const CompiledKernel& a, const CompiledKernel& b) {
  EXPECT_EQ(a.spec.entry, b.spec.entry);
  ASSERT_EQ(a.spec.params.size(), b.spec.params.size());
  for (size_t i = 0; i < a.spec.params.size(); ++i) {
    const KernelParam &x = a.spec.params[i], &y = b.spec.params[i];
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_EQ(x.buffer, y.buffer);
    EXPECT_EQ(x.value, y.value);
    EXPECT_EQ(x.scalar_dtype, y.scalar_dtype);
    EXPECT_EQ(x.workspace_bytes, y.workspace_bytes);
    EXPECT_EQ(x.workspace_zeroed, y.workspace_zeroed);
    EXPECT_EQ(x.tensor_map.buffer, y.tensor_map.buffer);
    EXPECT_EQ(x.tensor_map.global_dims, y.tensor_map.global_dims);
    EXPECT_EQ(x.tensor_map.global_strides, y.tensor_map.global_strides);
    EXPECT_EQ(x.tensor_map.box_dims, y.tensor_map.box_dims);
    EXPECT_EQ(x.tensor_map.swizzle_bytes, y.tensor_map.swizzle_bytes);
  }
  EXPECT_EQ(a.spec.grid, b.spec.grid);
  EXPECT_EQ(a.spec.block, b.spec.block);
  EXPECT_EQ(a.spec.dynamic_smem_bytes, b.spec.dynamic_smem_bytes);
  EXPECT_EQ(a.spec.cluster_x, b.spec.cluster_x);
  EXPECT_EQ(a.spec.cluster_y, b.spec.cluster_y);
  EXPECT_EQ(a.spec.cluster_z, b.spec.cluster_z);
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.cubin, b.cubin);
  EXPECT_EQ(a.ptx, b.ptx);
}

RunRequest Request() {
  RunRequest req;
  req.task.candidates = {Kernel("a"), Kernel("b")};
  req.task.reference64 = Kernel("ref");
  req.task.eager = Kernel("eager");
  req.task.symbol_values = {1 << 20, -3};
  req.task.inputs = {{DType::kBF16, 100, InputDomain::kPositive},
                     {DType::kI32, 5, InputDomain::kUnit, /*wide_reference=*/true, /*index_extent=*/50257,
                      /*index_other=*/-100}};
  req.task.outputs = {{DType::kF32, 100, InputDomain::kAny}};
  req.task.timing = {5, 50, 0.25, false, 7};
  req.task.budget_seconds = 1.75;
  req.budget_left_seconds = 0.5;
  req.task.slack = 3.5;
  req.task.seed = 0xDEADBEEFCAFEull;
  req.task.watchdog_seconds = 4.5;
  req.first_candidate = 1;
  req.memory_budget_bytes = int64_t{1} << 33;
  return req;
}

TEST(WorkerProtocolTest, RunRequestRoundTrips) {
  const RunRequest req = Request();
  absl::StatusOr<RunRequest> got = DecodeRunRequest(EncodeRunRequest(req));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->task.candidates.size(), 2u);
  ExpectSameKernel(got->task.candidates[0], req.task.candidates[0]);
  ExpectSameKernel(got->task.candidates[1], req.task.candidates[1]);
  ExpectSameKernel(got->task.reference64, req.task.reference64);
  ExpectSameKernel(got->task.eager, req.task.eager);
  EXPECT_EQ(got->task.symbol_values, req.task.symbol_values);
  ASSERT_EQ(got->task.inputs.size(), 2u);
  EXPECT_EQ(got->task.inputs[0].dtype, DType::kBF16);
  EXPECT_EQ(got->task.inputs[0].elements, 100);
  EXPECT_EQ(got->task.inputs[0].domain, InputDomain::kPositive);
  EXPECT_EQ(got->task.inputs[1].domain, InputDomain::kUnit);
  EXPECT_FALSE(got->task.inputs[0].wide_reference);
  EXPECT_TRUE(got->task.inputs[1].wide_reference);
  EXPECT_EQ(got->task.inputs[0].index_extent, 0);
  EXPECT_EQ(got->task.inputs[0].index_other, -1);
  EXPECT_EQ(got->task.inputs[1].index_extent, 50257);
  EXPECT_EQ(got->task.inputs[1].index_other, -100);
  EXPECT_EQ(got->task.outputs[0].dtype, DType::kF32);
  EXPECT_EQ(got->task.timing.warmup, 5);
  EXPECT_EQ(got->task.timing.repeats, 50);
  EXPECT_EQ(got->task.timing.max_seconds, 0.25);
  EXPECT_FALSE(got->task.timing.flush_l2);
  EXPECT_EQ(got->task.timing.min_repeats, 7);
  EXPECT_EQ(got->task.budget_seconds, 1.75);
  EXPECT_EQ(got->budget_left_seconds, 0.5);
  EXPECT_EQ(got->task.slack, 3.5);
  EXPECT_EQ(got->task.seed, req.task.seed);
  EXPECT_EQ(got->task.watchdog_seconds, 4.5);
  EXPECT_EQ(got->first_candidate, 1u);
  EXPECT_EQ(got->memory_budget_bytes, req.memory_budget_bytes);
}

TEST(WorkerProtocolTest, RepliesRoundTrip) {
  TrialResult t{7, Outcome::kWrongResult, 1.5e-5, {1e-5, 2e-5}, "output 0: max abs error"};
  absl::StatusOr<TrialResult> t2 = DecodeTrialResult(EncodeTrialResult(t));
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->index, 7u);
  EXPECT_EQ(t2->outcome, Outcome::kWrongResult);
  EXPECT_EQ(t2->samples_seconds, t.samples_seconds);
  EXPECT_EQ(t2->message, t.message);

  HelloReply h;
  h.status = absl::UnavailableError("no GPU");
  h.device.name = "NVIDIA H200";
  h.device.cc_major = 9;
  h.device.sm_count = 132;
  h.device.l2_bytes = 60 << 20;
  h.device.memory_bytes = int64_t{141} << 30;
  h.device.power_limit_mw = 700000;
  h.device.ecc = true;
  absl::StatusOr<HelloReply> h2 = DecodeHelloReply(EncodeHelloReply(h));
  ASSERT_TRUE(h2.ok());
  EXPECT_EQ(h2->status, h.status);
  EXPECT_EQ(h2->device.Digest(), h.device.Digest());

  CeilingsReply c;
  c.ceilings.read_bw = 4.3e12;
  c.ceilings.tensor_flops = 6e14;
  c.ceilings.measured = true;
  c.ceilings.source = "measured on NVIDIA H200";
  absl::StatusOr<CeilingsReply> c2 = DecodeCeilingsReply(EncodeCeilingsReply(c));
  ASSERT_TRUE(c2.ok());
  EXPECT_TRUE(c2->status.ok());
  EXPECT_EQ(c2->ceilings.read_bw, 4.3e12);
  EXPECT_EQ(c2->ceilings.tensor_flops, 6e14);
  EXPECT_EQ(c2->ceilings.source, c.ceilings.source);

  absl::StatusOr<absl::Status> s = DecodeStatus(EncodeStatus(absl::AbortedError("faulted")));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, absl::AbortedError("faulted"));
}

TEST(WorkerProtocolTest, HelloOfAnotherVersionIsRefusedNamingBoth) {
  EXPECT_TRUE(CheckHello(EncodeHello()).ok());
  for (uint32_t other : {kWorkerProtocolVersion + 1, kWorkerProtocolVersion - 1}) {
    absl::Status s = CheckHello(EncodeHello(other));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(s.message()),
                HasSubstr(absl::StrCat("its parent speaks worker protocol ", other,
                                       ", this build ", kWorkerProtocolVersion)));
  }
  // An unversioned parent sends an empty hello.
  EXPECT_THAT(std::string(CheckHello("").message()), HasSubstr("worker protocol 1,"));
  EXPECT_EQ(CheckHello(EncodeHello() + "x").code(), absl::StatusCode::kDataLoss);

  HelloReply h;
  h.version = kWorkerProtocolVersion + 1;
  absl::StatusOr<HelloReply> got = DecodeHelloReply(EncodeHelloReply(h));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr(absl::StrCat("the tuning worker speaks worker protocol ",
                                     kWorkerProtocolVersion + 1)));
  // An unversioned worker's reply: its status first (OK, an empty message),
  // then the fingerprint.
  WireWriter old;
  old.U32(0);
  old.Str("");
  const std::string device = EncodeHelloReply(HelloReply{}).substr(8 + 4 + 8);
  got = DecodeHelloReply(old.data() + device);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("worker protocol 1,"));
}

// Every message's bytes for fixed contents, hashed: a change to any encoding
// changes the digest. Bump kWorkerProtocolVersion with it and record both.
TEST(WorkerProtocolTest, EncodingsMatchTheVersion) {
  HelloReply h;
  h.status = absl::UnavailableError("no GPU");
  h.device.name = "NVIDIA H200";
  h.device.cc_major = 9;
  h.device.sm_count = 132;
  CeilingsReply c;
  c.ceilings.read_bw = 4.3e12;
  c.ceilings.source = "measured";
  const std::string all =
      EncodeHello() + EncodeRunRequest(Request()) +
      EncodeTrialResult({7, Outcome::kWrongResult, 1.5e-5, {1e-5, 2e-5}, "max abs error"}) +
      EncodeStatus(absl::AbortedError("faulted")) + EncodeHelloReply(h) + EncodeCeilingsReply(c);
  uint64_t fnv = 0xcbf29ce484222325ull;
  for (unsigned char ch : all) fnv = (fnv ^ ch) * 0x100000001b3ull;
  EXPECT_EQ(kWorkerProtocolVersion, 4u);
  EXPECT_EQ(fnv, 0x0056a0709042e596ull)
      << std::hex << "digest 0x" << fnv
      << ": an encoding changed; bump kWorkerProtocolVersion, then record both here";
}

TEST(WorkerProtocolTest, TruncatedOrPaddedPayloadIsDataLoss) {
  std::string full = EncodeTrialResult({1, Outcome::kOk, 1.0, {1.0, 2.0}, "ok"});
  for (size_t cut : {size_t{0}, size_t{3}, full.size() - 1}) {
    EXPECT_EQ(DecodeTrialResult(full.substr(0, cut)).status().code(), absl::StatusCode::kDataLoss)
        << cut;
  }
  EXPECT_EQ(DecodeTrialResult(full + "x").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeRunRequest("garbage").status().code(), absl::StatusCode::kDataLoss);
}

// A count is checked against the bytes left before any item is read, so no
// caller sizes anything by a count the payload cannot hold.
TEST(WorkerProtocolTest, AHugeCountIsRefusedBeforeItsItems) {
  WireWriter w;
  w.U32(0);
  w.U8(1);
  w.F64(0);
  w.U64(uint64_t{1} << 60);
  w.F64(1.5);  // One sample: the loop could read it, not 2^60 of them.
  WireReader r(w.data());
  r.U32();
  r.U8();
  r.F64();
  EXPECT_EQ(r.Count(8), 0u);
  EXPECT_FALSE(r.ok());
  absl::StatusOr<TrialResult> t = DecodeTrialResult(w.data());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("count 1152921504606846976 exceeds the payload at byte 21"));
}

TEST(WorkerWireTest, FramesOverASocketWithTimeoutAndEof) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  std::string big(1 << 20, 'z');  // Larger than the socket buffer: sent in pieces.
  std::thread sender([&] { EXPECT_TRUE(SendFrame(fds[0], 42, big, 5.0).ok()); });
  absl::StatusOr<Frame> f = RecvFrame(fds[1], 5.0, kMaxFrameBytes);
  sender.join();
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->type, 42u);
  EXPECT_EQ(f->payload, big);
  EXPECT_EQ(RecvFrame(fds[1], 0.05, kMaxFrameBytes).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  close(fds[0]);
  EXPECT_EQ(RecvFrame(fds[1], 1.0, kMaxFrameBytes).status().code(), absl::StatusCode::kUnavailable);
  // Writing to a closed peer is an error, not SIGPIPE.
  EXPECT_EQ(SendFrame(fds[1], 1, "x", 1.0).code(), absl::StatusCode::kUnavailable);
  close(fds[1]);
}

// A frame header as SendFrame writes it, claiming `length` bytes of payload.
std::string Header(uint32_t type, uint64_t length) {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  EXPECT_TRUE(SendFrame(fds[0], type, "", 1.0).ok());
  char h[16] = {};
  EXPECT_EQ(read(fds[1], h, sizeof(h)), 16);
  close(fds[0]);
  close(fds[1]);
  std::memcpy(h + 8, &length, sizeof(length));
  return std::string(h, sizeof(h));
}

int64_t MaxRssBytes() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return int64_t{u.ru_maxrss} * 1024;
}

TEST(WorkerWireTest, AFrameLongerThanTheCallerTakesIsDataLossAtOnce) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const std::string h = Header(kMsgTrial, 5 << 20);
  ASSERT_EQ(write(fds[0], h.data(), h.size()), 16);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<Frame> f = RecvFrame(fds[1], 5.0, /*max_bytes=*/4 << 20);
  const std::chrono::duration<double> waited = std::chrono::steady_clock::now() - start;
  EXPECT_LT(waited.count(), 2.0);  // Refused at the header, not waited for.
  EXPECT_EQ(f.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("frame of 5242880 bytes"));
  close(fds[0]);
  close(fds[1]);
}

// A header claiming 1 GiB followed by a few bytes costs memory for the few.
TEST(WorkerWireTest, MemoryFollowsTheBytesThatArriveNotTheHeader) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const std::string bytes = Header(kMsgRun, uint64_t{1} << 30) + std::string(1000, 'x');
  ASSERT_EQ(write(fds[0], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fds[0]);
  const int64_t before = MaxRssBytes();
  EXPECT_EQ(RecvFrame(fds[1], 5.0, kMaxFrameBytes).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(MaxRssBytes() - before, int64_t{64} << 20);
  close(fds[1]);
}

TEST(WorkerWireTest, SendGivesUpOnAPeerThatDoesNotRead) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const std::string big(8 << 20, 'x');  // Far more than the socket buffers hold.
  auto sent = std::async(std::launch::async, [&] { return SendFrame(fds[0], 4, big, 0.2); });
  // Past any deadline: close the peer, or a send without one would block for good.
  const bool ended = sent.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!ended) close(fds[1]);
  EXPECT_EQ(sent.get().code(), absl::StatusCode::kDeadlineExceeded);
  close(fds[0]);
  if (ended) close(fds[1]);
}

TEST(WorkerWireTest, BadMagicIsDataLoss) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  const char junk[16] = "not a frame....";
  ASSERT_EQ(write(fds[0], junk, 16), 16);
  EXPECT_EQ(RecvFrame(fds[1], 1.0, kMaxFrameBytes).status().code(), absl::StatusCode::kDataLoss);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace kfuse
