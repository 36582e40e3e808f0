#include "codegen/partition.h"

#include <string>

#include "codegen/canonicalize.h"
#include "codegen/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

Chain Typed(Chain c) {
  auto v = Validate(std::move(c));
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? Canonicalize(*v) : Chain{};
}

TEST(PartitionTest, ElementwiseChainIsOnePointwiseKernel) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kBF16, {Dim::Static(8), Dim::Static(16)}});
  int b = c.AddInput(TensorType{DType::kBF16, {Dim::Static(16)}});
  int s = c.AddOp(OpKind::kAdd, {x, b});
  int pos = c.AddOp(OpKind::kGt, {s, c.AddConstant(0)});
  int w = c.AddOp(OpKind::kWhere, {pos, s, c.AddConstant(0.5)});
  c.outputs = {c.AddCast(w, DType::kF32), s};
  Chain t = Typed(c);
  auto p = PartitionChain(t);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  const KernelGroup& k = p->kernels[0];
  EXPECT_EQ(k.family, Family::kPointwise);
  EXPECT_EQ(k.reason, "element-wise chain fused into one pass");
  EXPECT_EQ(k.nodes.size(), 4u);  // add, gt, where, cast; constants are not listed.
  for (int32_t id : k.nodes) EXPECT_NE(t.nodes[id].kind, OpKind::kConstant);
  EXPECT_EQ(k.results.size(), 2u);
  EXPECT_TRUE(p->intermediates.empty());
}

TEST(PartitionTest, NotYetGeneratedOpsAreUnimplemented) {
  struct Case {
    OpKind kind;
    const char* message;
  } cases[] = {
      {OpKind::kReduceSum, "op 1 (reduce_sum): reductions over an outer axis are not generated yet"},
      {OpKind::kPermute, "op 1 (permute): layout views are not generated yet"},
      {OpKind::kMatmul, "op 1 (matmul): matmul is not generated yet"},
  };
  for (const Case& k : cases) {
    Chain c;
    int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(4)}});
    int e = c.AddOp(OpKind::kExp, {x});
    int op = c.AddOp(
        k.kind, k.kind == OpKind::kMatmul ? std::vector<int32_t>{e, e} : std::vector<int32_t>{e});
    if (k.kind == OpKind::kReduceSum) c.nodes[op].axes = {0};
    if (k.kind == OpKind::kPermute) c.nodes[op].axes = {1, 0};
    c.nodes[e].wire_index = 0;
    c.nodes[op].wire_index = 1;
    c.outputs = {op};
    auto p = PartitionChain(Typed(c));
    EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(std::string(p.status().message()), HasSubstr(k.message));
  }
}

TEST(PartitionTest, RowReductionChainIsOneRowKernel) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(64)}});
  int m = c.AddOp(OpKind::kReduceMax, {x});
  c.nodes[m].axes = {1};
  c.nodes[m].keepdim = true;
  int e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {x, m})});
  c.outputs = {e, m};
  auto p = PartitionChain(Typed(c));
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_EQ(p->kernels[0].family, Family::kRowReduction);
  EXPECT_EQ(p->kernels[0].nodes.size(), 3u);
  EXPECT_EQ(p->kernels[0].results.size(), 2u);
}

}  // namespace
}  // namespace kfuse

namespace kfuse {
namespace {

// Found by fuzzing: an identity chain reached the generator as an empty
// kernel; outputs that do not broadcast together reached it as INTERNAL.
TEST(PartitionRegressionTest, NothingToComputeIsInvalidArgument) {
  Chain c;
  int x = c.AddInput(TensorType{DType::kF32, {Dim::Static(8)}});
  c.outputs = {x};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  absl::StatusOr<Partition> p = PartitionChain(Canonicalize(*v));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("outputs"), std::string::npos) << p.status();
}

TEST(PartitionRegressionTest, OutputsThatDoNotBroadcastTogetherAreUnimplemented) {
  Chain c;
  int a = c.AddInput(TensorType{DType::kF32, {Dim::Static(33)}});
  int b = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(128)}});
  c.outputs = {c.AddOp(OpKind::kRelu, {a}), c.AddOp(OpKind::kExp, {b})};
  auto v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  absl::StatusOr<Partition> p = PartitionChain(Canonicalize(*v));
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("outputs[1]"), std::string::npos) << p.status();
}

}  // namespace
}  // namespace kfuse
