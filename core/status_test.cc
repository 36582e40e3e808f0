#include "core/status.h"

#include <map>
#include <stdexcept>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

TEST(CatchingBugsTest, PassesStatusesOnAndAnswersAnExceptionAsInternal) {
  EXPECT_EQ(*CatchingBugs("planning", [] { return absl::StatusOr<int>(7); }), 7);
  const absl::Status refused = CatchingBugs("planning", [] { return absl::InvalidArgumentError("ops[2]"); });
  EXPECT_EQ(refused, absl::InvalidArgumentError("ops[2]"));

  const std::map<int, int> none;
  absl::StatusOr<int> thrown = CatchingBugs("planning", [&] { return absl::StatusOr<int>(none.at(3)); });
  EXPECT_EQ(thrown.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(thrown.status().message(), HasSubstr("planning met a bug of ours: "));
  EXPECT_THAT(thrown.status().message(), HasSubstr("map::at"));
  const absl::Status length = CatchingBugs("planning", []() -> absl::Status { throw std::length_error("vector"); });
  EXPECT_EQ(length, absl::InternalError("planning met a bug of ours: vector"));
}

}  // namespace
}  // namespace kfuse
