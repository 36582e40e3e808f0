// Structured logs: one event a line on stderr, as JSON for log collectors
// (--log_format=json) or as text for people (the default). Every event that
// belongs to a request carries its request id.
//
//   LogEvent(LogLevel::kWarning, "fleet_unavailable",
//            {{"error", status.ToString()}, {"retry_in_s", "5"}});
//   LogEvent(LogLevel::kInfo, "build", {{"request_id", id}, {"key", key}, {"seconds", "1.2"}});
//
// JSON: {"ts":"2026-11-30T03:04:05.678Z","level":"warning","event":"fleet_unavailable","error":"...",...}
// Text: 2026-11-30T03:04:05.678Z W fleet_unavailable error="..." retry_in_s=5
// Values are escaped (JSON strings; text quotes values with spaces), so a
// client string in a field cannot forge a line.
#ifndef KFUSE_CORE_LOG_H_
#define KFUSE_CORE_LOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace kfuse {

enum class LogLevel { kDebug, kInfo, kWarning, kError };
enum class LogFormat { kText, kJson };

// Process-wide; set once at start-up (reads and writes are atomic).
void SetLogFormat(LogFormat format);
// "text" | "json" -> true and sets *format; anything else -> false (the
// caller answers InvalidArgument naming its flag).
bool ParseLogFormat(absl::string_view name, LogFormat* format);

struct LogField {
  absl::string_view key;
  std::string value;
};

// Writes one line atomically (one write(2) call) to stderr.
void LogEvent(LogLevel level, absl::string_view event, absl::Span<const LogField> fields);

// The line LogEvent would write, without the trailing newline (for tests).
std::string FormatLogLine(LogFormat format, LogLevel level, absl::string_view event,
                          absl::Span<const LogField> fields);

// A background task that fails on every round (a store that became
// unwritable, a peer that is down) logs its first failure, then at most one
// line an interval saying how many failures it held back, and one line when
// it succeeds again:
//
//   RepeatedFailureLog flush_log("store_hits_not_written", absl::Minutes(1));
//   if (st.ok()) flush_log.Succeeded({{"store", path}});
//   else flush_log.Failed(absl::Now(), {{"store", path}, {"error", st.ToString()}});
//
// Failed() writes `event` (a warning) with "repeats" (failures since the last
// line, this one included) once the interval has passed; Succeeded() writes
// `event` + "_cleared" (info) with "failures" (the run's length) after a run of
// failures. Each returns whether it wrote a line. One caller at a time.
class RepeatedFailureLog {
 public:
  RepeatedFailureLog(std::string event, absl::Duration interval);

  bool Failed(absl::Time now, std::vector<LogField> fields);
  bool Succeeded(std::vector<LogField> fields);

 private:
  const std::string event_;
  const absl::Duration interval_;
  int64_t failures_ = 0;        // In the current run.
  int64_t since_logged_ = 0;    // Failures since the last line.
  absl::Time last_logged_ = absl::InfinitePast();
};

}  // namespace kfuse

#endif  // KFUSE_CORE_LOG_H_
