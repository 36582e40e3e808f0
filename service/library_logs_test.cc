#include "service/library_logs.h"

#include <string>

#include "core/log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A request whose string field is not UTF-8 makes protobuf log a line; under
// JSON it is an event like every other line.
TEST(LibraryLogsTest, ProtobufsLinesAreEvents) {
  SetLogFormat(LogFormat::kJson);
  RouteLibraryLogsToEvents();
  v1::CompileRequest req;
  req.mutable_chain()->add_inputs()->set_name("QQQQ");
  std::string bytes = req.SerializeAsString();
  bytes.replace(bytes.find("QQQQ"), 4, "\xff\xfe\xc0\x80");
  ::testing::internal::CaptureStderr();
  v1::CompileRequest parsed;
  const bool ok = parsed.ParseFromString(bytes);
  const std::string out = ::testing::internal::GetCapturedStderr();
  SetLogFormat(LogFormat::kText);
  EXPECT_FALSE(ok);
  EXPECT_THAT(out, StartsWith("{\"ts\":"));
  EXPECT_THAT(out, HasSubstr("\"level\":\"error\",\"event\":\"protobuf\""));
  EXPECT_THAT(out, HasSubstr("invalid UTF-8"));
  EXPECT_EQ(out.find('\n'), out.size() - 1) << out;  // One line.
}

}  // namespace
}  // namespace kfuse
