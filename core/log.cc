#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/utf8.h"

namespace kfuse {
namespace {

std::atomic<LogFormat> g_format{LogFormat::kText};

const char* JsonLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "info";
}

char TextLevel(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return 'I';
}

// A JSON string literal, quotes included. Control characters become
// \u00XX, and bytes that are not UTF-8 become U+FFFD, so the line stays one
// valid JSON object whatever a client sent.
void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20 || c == 0x7F) {
      absl::StrAppendFormat(out, "\\u%04x", c);
    } else if (c >= 0x80) {
      size_t n = Utf8SequenceLength(s.substr(i));
      if (n == 0) {
        out->append("\\ufffd");
        ++i;
        continue;
      }
      out->append(s.data() + i, n);
      i += n;
      continue;
    } else {
      out->push_back(static_cast<char>(c));
    }
    ++i;
  }
  out->push_back('"');
}

// Text values stay bare when they are plain words; anything with a space, a
// quote, '=', a backslash or a control character is quoted and escaped, so
// one event is always one line and key=value pairs cannot be forged.
bool NeedsQuotes(absl::string_view s) {
  if (s.empty()) return true;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c == 0x7F || c == '"' || c == '=' || c == '\\') return true;
  }
  return false;
}

void AppendTextValue(std::string* out, absl::string_view s) {
  if (!NeedsQuotes(s)) {
    out->append(s.data(), s.size());
    return;
  }
  out->push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          absl::StrAppendFormat(out, "\\x%02x", c);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

// Keys come from our code; anything but [A-Za-z0-9_.-] becomes '_' so a
// bad key cannot break the line either.
void AppendTextKey(std::string* out, absl::string_view key) {
  if (key.empty()) {
    out->push_back('_');
    return;
  }
  for (char c : key) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '.' || c == '-';
    out->push_back(plain ? c : '_');
  }
}

std::string Timestamp() { return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()); }

}  // namespace

void SetLogFormat(LogFormat format) { g_format.store(format, std::memory_order_relaxed); }

bool ParseLogFormat(absl::string_view name, LogFormat* format) {
  if (name == "text") {
    *format = LogFormat::kText;
    return true;
  }
  if (name == "json") {
    *format = LogFormat::kJson;
    return true;
  }
  return false;
}

std::string FormatLogLine(LogFormat format, LogLevel level, absl::string_view event,
                          absl::Span<const LogField> fields) {
  std::string line;
  line.reserve(96 + 32 * fields.size());
  if (format == LogFormat::kJson) {
    line.append("{\"ts\":");
    AppendJsonString(&line, Timestamp());
    line.append(",\"level\":");
    AppendJsonString(&line, JsonLevel(level));
    line.append(",\"event\":");
    AppendJsonString(&line, event);
    for (const LogField& f : fields) {
      line.push_back(',');
      AppendJsonString(&line, f.key);
      line.push_back(':');
      AppendJsonString(&line, f.value);
    }
    line.push_back('}');
    return line;
  }
  line.append(Timestamp());
  line.push_back(' ');
  line.push_back(TextLevel(level));
  line.push_back(' ');
  AppendTextValue(&line, event);
  for (const LogField& f : fields) {
    line.push_back(' ');
    AppendTextKey(&line, f.key);
    line.push_back('=');
    AppendTextValue(&line, f.value);
  }
  return line;
}

void LogEvent(LogLevel level, absl::string_view event, absl::Span<const LogField> fields) {
  std::string line = FormatLogLine(g_format.load(std::memory_order_relaxed), level, event, fields);
  line.push_back('\n');
  // One write(2) for the whole line, so lines of concurrent threads never
  // interleave; the loop only finishes a write a signal cut short.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // Nowhere left to report it.
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

RepeatedFailureLog::RepeatedFailureLog(std::string event, absl::Duration interval)
    : event_(std::move(event)), interval_(interval) {}

bool RepeatedFailureLog::Failed(absl::Time now, std::vector<LogField> fields) {
  ++failures_;
  ++since_logged_;
  if (failures_ > 1 && now - last_logged_ < interval_) return false;
  fields.push_back({"repeats", absl::StrCat(since_logged_)});
  LogEvent(LogLevel::kWarning, event_, fields);
  last_logged_ = now;
  since_logged_ = 0;
  return true;
}

bool RepeatedFailureLog::Succeeded(std::vector<LogField> fields) {
  if (failures_ == 0) return false;
  fields.push_back({"failures", absl::StrCat(failures_)});
  LogEvent(LogLevel::kInfo, absl::StrCat(event_, "_cleared"), fields);
  failures_ = 0;
  since_logged_ = 0;
  last_logged_ = absl::InfinitePast();
  return true;
}

}  // namespace kfuse
