#include "tuner/worker_launch.h"

#include <utility>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

// A grid of ceil(n / 256) blocks of `block` threads.
KernelSpec Spec(SizeExpr block_x, SizeExpr block_y = SizeExpr::Const(1)) {
  KernelSpec s;
  s.grid.x = SizeExpr::CeilDiv(SizeExpr::Symbol(0), SizeExpr::Const(256));
  s.block.x = std::move(block_x);
  s.block.y = std::move(block_y);
  return s;
}

TEST(EvalLaunchDimsTest, DimsWithinCudasLimitsAreEvaluated) {
  absl::StatusOr<LaunchDims> d = EvalLaunchDims(Spec(SizeExpr::Const(256)), {1000});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->grid[0], 4u);
  EXPECT_EQ(d->grid[1], 1u);
  EXPECT_EQ(d->block[0], 256u);
}

TEST(EvalLaunchDimsTest, DimsPastCudasLimitsAreRefusedNamingTheDim) {
  // 2^40 / 256 blocks: past grid x's 2^31 - 1.
  absl::Status grid = EvalLaunchDims(Spec(SizeExpr::Const(256)), {int64_t{1} << 40}).status();
  EXPECT_EQ(grid.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(grid.message(), HasSubstr("grid"));
  EXPECT_THAT(grid.message(), HasSubstr("is outside [1, 2147483647]"));
  absl::Status block = EvalLaunchDims(Spec(SizeExpr::Const(2048)), {1000}).status();
  EXPECT_THAT(block.message(), HasSubstr("block"));
  absl::Status threads = EvalLaunchDims(Spec(SizeExpr::Const(64), SizeExpr::Const(32)), {1000}).status();
  EXPECT_THAT(threads.message(), HasSubstr("more than 1024 threads"));
  absl::Status empty = EvalLaunchDims(Spec(SizeExpr::Const(256)), {0}).status();
  EXPECT_THAT(empty.message(), HasSubstr("is outside [1, "));
}

}  // namespace
}  // namespace kfuse
