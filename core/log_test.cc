#include "core/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

// A strict reader for the flat JSON objects of string values FormatLogLine
// writes: fails on anything else (a raw control character, a bad escape,
// trailing text), so a line that is not one valid object cannot pass.
bool ParseFlatJson(const std::string& s, std::map<std::string, std::string>* out) {
  size_t i = 0;
  auto read_string = [&](std::string* v) {
    if (i >= s.size() || s[i] != '"') return false;
    ++i;
    while (i < s.size() && s[i] != '"') {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (c < 0x20) return false;
      if (c != '\\') {
        v->push_back(s[i++]);
        continue;
      }
      if (++i >= s.size()) return false;
      char e = s[i++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          v->push_back(e);
          break;
        case 'n':
          v->push_back('\n');
          break;
        case 't':
          v->push_back('\t');
          break;
        case 'r':
          v->push_back('\r');
          break;
        case 'u': {
          if (i + 4 > s.size()) return false;
          unsigned long cp = std::stoul(s.substr(i, 4), nullptr, 16);
          i += 4;
          if (cp < 0x80) {
            v->push_back(static_cast<char>(cp));
          } else if (cp == 0xFFFD) {
            v->append("\xEF\xBF\xBD");
          } else {
            return false;  // Not written by FormatLogLine.
          }
          break;
        }
        default:
          return false;
      }
    }
    if (i >= s.size()) return false;
    ++i;
    return true;
  };
  if (s.empty() || s[i++] != '{') return false;
  while (true) {
    std::string key, value;
    if (!read_string(&key) || i >= s.size() || s[i++] != ':' || !read_string(&value)) return false;
    if (!out->emplace(key, value).second) return false;
    if (i >= s.size()) return false;
    char c = s[i++];
    if (c == '}') return i == s.size();
    if (c != ',') return false;
  }
}

const std::regex kTimestamp(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");

TEST(LogTest, JsonLineParsesBackWithEveryByteOfTheValues) {
  const std::string nasty =
      "a\"b\\c\nd\x01"
      "e\t}{\"level\":\"error\"";
  std::string line = FormatLogLine(LogFormat::kJson, LogLevel::kWarning, "fleet_unavailable",
                                   {{"error", nasty}, {"retry_in_s", "5"}});
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find(R"(a\"b\\c\u000ad\u0001e\u0009})"), std::string::npos) << line;
  std::map<std::string, std::string> fields;
  ASSERT_TRUE(ParseFlatJson(line, &fields)) << line;
  EXPECT_EQ(fields.size(), 5u);
  EXPECT_TRUE(std::regex_match(fields["ts"], kTimestamp)) << fields["ts"];
  EXPECT_EQ(fields["level"], "warning");
  EXPECT_EQ(fields["event"], "fleet_unavailable");
  EXPECT_EQ(fields["error"], nasty);
  EXPECT_EQ(fields["retry_in_s"], "5");
  EXPECT_EQ(line.rfind("{\"ts\":\"", 0), 0u) << line;
}

TEST(LogTest, JsonKeepsUtf8AndReplacesBytesThatAreNotUtf8) {
  std::string line = FormatLogLine(LogFormat::kJson, LogLevel::kInfo, "build",
                                   {{"name", "caf\xC3\xA9"}, {"raw", "x\xFF\xC3y"}, {"del", "\x7F"}});
  std::map<std::string, std::string> fields;
  ASSERT_TRUE(ParseFlatJson(line, &fields)) << line;
  EXPECT_EQ(fields["name"], "caf\xC3\xA9");
  EXPECT_EQ(fields["raw"], "x\xEF\xBF\xBD\xEF\xBF\xBDy");
  EXPECT_EQ(fields["del"], "\x7F");
  EXPECT_EQ(fields["level"], "info");
}

TEST(LogTest, TextQuotesValuesThatNeedIt) {
  std::string line = FormatLogLine(LogFormat::kText, LogLevel::kWarning, "fleet_unavailable",
                                   {{"plain", "abc-1.5"},
                                    {"spaces", "two words"},
                                    {"eq", "k=v"},
                                    {"quote", "say \"hi\""},
                                    {"ctl", "line\nbreak\x01"},
                                    {"empty", ""}});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, std::regex("^(\\S+) W fleet_unavailable "))) << line;
  EXPECT_TRUE(std::regex_match(m[1].str(), kTimestamp)) << line;
  EXPECT_EQ(line.substr(m[0].length()),
            R"(plain=abc-1.5 spaces="two words" eq="k=v" quote="say \"hi\"" ctl="line\nbreak\x01" empty="")")
      << line;
}

TEST(LogTest, TextValueCannotForgeAFieldOrALine) {
  std::string line = FormatLogLine(LogFormat::kText, LogLevel::kError, "auth",
                                   {{"client", "x level=I\n2026-01-01T00:00:00.000Z I forged"}});
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  EXPECT_NE(line.find(R"( E auth client="x level=I\n2026-01-01T00:00:00.000Z I forged")"), std::string::npos)
      << line;
}

TEST(LogTest, TextLevelLetters) {
  EXPECT_NE(FormatLogLine(LogFormat::kText, LogLevel::kDebug, "e", {}).find(" D e"), std::string::npos);
  EXPECT_NE(FormatLogLine(LogFormat::kText, LogLevel::kInfo, "e", {}).find(" I e"), std::string::npos);
  EXPECT_NE(FormatLogLine(LogFormat::kText, LogLevel::kError, "e", {}).find(" E e"), std::string::npos);
}

TEST(LogTest, ParseLogFormat) {
  LogFormat f = LogFormat::kText;
  EXPECT_TRUE(ParseLogFormat("json", &f));
  EXPECT_EQ(f, LogFormat::kJson);
  EXPECT_TRUE(ParseLogFormat("text", &f));
  EXPECT_EQ(f, LogFormat::kText);
  f = LogFormat::kJson;
  EXPECT_FALSE(ParseLogFormat("xml", &f));
  EXPECT_FALSE(ParseLogFormat("", &f));
  EXPECT_FALSE(ParseLogFormat("json ", &f));
  EXPECT_EQ(f, LogFormat::kJson);  // Untouched on failure.
}

// What LogEvent writes to fd 2 while `fn` runs.
template <typename Fn>
std::string CaptureStderr(Fn fn) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return "";
  int saved = dup(STDERR_FILENO);
  dup2(pipe_fds[1], STDERR_FILENO);
  close(pipe_fds[1]);
  fn();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  close(pipe_fds[0]);
  return out;
}

TEST(LogTest, LogEventWritesOneLineInTheProcessFormat) {
  std::string json = CaptureStderr([] {
    SetLogFormat(LogFormat::kJson);
    LogEvent(LogLevel::kInfo, "build", {{"request_id", "r1"}, {"seconds", "1.2"}});
  });
  std::string text = CaptureStderr([] {
    SetLogFormat(LogFormat::kText);
    LogEvent(LogLevel::kInfo, "build", {{"request_id", "r1"}});
  });
  ASSERT_FALSE(json.empty());
  EXPECT_EQ(json.find('\n'), json.size() - 1) << json;
  std::map<std::string, std::string> fields;
  ASSERT_TRUE(ParseFlatJson(json.substr(0, json.size() - 1), &fields)) << json;
  EXPECT_EQ(fields["event"], "build");
  EXPECT_EQ(fields["request_id"], "r1");
  EXPECT_TRUE(std::regex_match(text, std::regex(R"(\S+Z I build request_id=r1\n)"))) << text;
}

TEST(LogTest, RepeatedFailuresLogTheFirstThenOneLineAnIntervalThenTheRecovery) {
  SetLogFormat(LogFormat::kText);
  RepeatedFailureLog log("store_hits_not_written", absl::Seconds(60));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  std::vector<bool> wrote;
  std::string out = CaptureStderr([&] {
    EXPECT_FALSE(log.Succeeded({{"store", "k.db"}}));  // Nothing failed yet: silent.
    for (int s = 0; s < 125; ++s) wrote.push_back(log.Failed(t0 + absl::Seconds(s), {{"error", "read-only"}}));
    EXPECT_TRUE(log.Succeeded({{"store", "k.db"}}));
    EXPECT_FALSE(log.Succeeded({{"store", "k.db"}}));
    EXPECT_TRUE(log.Failed(t0 + absl::Seconds(126), {{"error", "again"}}));  // A new run logs at once.
  });
  std::vector<int> logged_at;
  for (int s = 0; s < static_cast<int>(wrote.size()); ++s) {
    if (wrote[s]) logged_at.push_back(s);
  }
  EXPECT_EQ(logged_at, (std::vector<int>{0, 60, 120}));
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << out;
  EXPECT_NE(lines[0].find("W store_hits_not_written error=read-only repeats=1"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("repeats=60"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("repeats=60"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find("I store_hits_not_written_cleared store=k.db failures=125"), std::string::npos) << lines[3];
  EXPECT_NE(lines[4].find("error=again repeats=1"), std::string::npos) << lines[4];
}

}  // namespace
}  // namespace kfuse
