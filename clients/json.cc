#include "clients/json.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/json_depth.h"
#include "core/status.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

namespace kfuse::client {
namespace {

// protobuf's JSON parser reports syntax errors without a position that a user
// can find in an editor; locate the first syntax problem ourselves by a small
// scan of the structure (strings, nesting). Returns "" when none is found.
struct Position {
  int line = 1;
  int column = 1;
};

Position PositionOf(const std::string& text, size_t offset) {
  Position p;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++p.line;
      p.column = 1;
    } else {
      ++p.column;
    }
  }
  return p;
}

// The offset of the first obvious syntax error (unbalanced bracket, stray
// character outside strings/literals, unterminated string, a value right
// after another with no comma or colon between), or npos.
size_t FirstSyntaxError(const std::string& s) {
  std::string stack;
  bool in_string = false;
  size_t string_start = 0;
  char prev = 0;  // The previous significant character outside strings.
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (!in_string && !std::isspace(static_cast<unsigned char>(c))) {
      // A separator must be followed by a value (or a key).
      if ((prev == ',' || prev == ':' || prev == '[' || prev == '{') &&
          (c == ',' || c == ':')) {
        return i;
      }
      if ((prev == ',' || prev == ':') && (c == '}' || c == ']')) return i;
      // `prev` is '"' after a string (its opening quote), an alphanumeric
      // after a number or literal.
      const bool after_value = prev == '"' || prev == '}' || prev == ']' ||
                               std::isalnum(static_cast<unsigned char>(prev));
      const bool starts_value =
          c == '"' || c == '{' || c == '[' ||
          ((std::isalnum(static_cast<unsigned char>(c)) || c == '-') &&
           (prev == '"' || prev == '}' || prev == ']' ||
            (i > 0 && std::isspace(static_cast<unsigned char>(s[i - 1])))));
      if (after_value && starts_value) return i;
      prev = c;
    }
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      } else if (c == '\n') {
        return string_start;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        string_start = i;
        break;
      case '{':
      case '[':
        stack.push_back(c);
        break;
      case '}':
      case ']':
        if (stack.empty() || (stack.back() == '{') != (c == '}')) return i;
        stack.pop_back();
        if (stack.empty()) {
          // Only whitespace may follow the top-level value.
          for (size_t j = i + 1; j < s.size(); ++j) {
            if (!std::isspace(static_cast<unsigned char>(s[j]))) return j;
          }
          return std::string::npos;
        }
        break;
      default:
        if (std::isspace(static_cast<unsigned char>(c)) || c == ',' ||
            c == ':' || c == '-' || c == '+' || c == '.' ||
            std::isalnum(static_cast<unsigned char>(c))) {
          break;
        }
        return i;
    }
  }
  if (in_string) return string_start;
  if (!stack.empty()) return s.size();
  return std::string::npos;
}

// What protobuf's parser forgives and a reader would not: a key an object
// repeats (the parser keeps the last, so a file that says a field twice is
// read as saying it once) and a comma that ends an object or array. The
// offset of the first and what it is, or npos; malformed text is left to
// the parser. Keys compare as written (an escape that spells a key another
// way is not seen).
std::pair<size_t, std::string> FirstLaxConstruct(const std::string& s) {
  struct Open {
    bool object;
    std::set<std::string> keys;
  };
  std::vector<Open> open;
  char prev = 0;  // The previous significant character outside strings.
  size_t prev_at = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"' || c == '\'') {  // protobuf's parser takes single quotes too.
      const size_t start = i;
      for (++i; i < s.size() && s[i] != c; ++i) {
        if (s[i] == '\\') ++i;
      }
      if (i >= s.size()) break;
      size_t next = i + 1;
      while (next < s.size() && std::isspace(static_cast<unsigned char>(s[next]))) ++next;
      if (!open.empty() && open.back().object && next < s.size() && s[next] == ':' &&
          !open.back().keys.insert(s.substr(start + 1, i - start - 1)).second) {
        std::string key = s.substr(start + 1, std::min<size_t>(i - start - 1, 64));
        return {start, absl::StrCat("the key \"", absl::CHexEscape(key), "\" again in one object (which one ",
                                    "counts is not for a reader to guess)")};
      }
      prev = '"';
      prev_at = start;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) continue;
    if (c == '{' || c == '[') {
      open.push_back({c == '{', {}});
    } else if (c == '}' || c == ']') {
      if (prev == ',') return {prev_at, absl::StrCat("a comma before '", std::string(1, c), "'")};
      if (!open.empty()) open.pop_back();
    }
    prev = c;
    prev_at = i;
  }
  return {std::string::npos, ""};
}

// protobuf's word on an enum value it does not know names the enum's type
// URL but not how its values are spelt (OP_RELU, DTYPE_F32): a hint, the
// value meant where one matches but for its prefix or case.
std::string EnumHint(const std::string& why) {
  const std::string value_mark = "invalid value \"", type_mark = "type.googleapis.com/";
  // The type from the end: the value, client text, may hold the mark too.
  const size_t v = why.find(value_mark), t = why.rfind(type_mark);
  if (v == std::string::npos || t == std::string::npos) return "";
  const size_t v_end = why.find('"', v + value_mark.size());
  if (v_end == std::string::npos) return "";
  const std::string value = absl::AsciiStrToUpper(why.substr(v + value_mark.size(), v_end - v - value_mark.size()));
  size_t t_end = t + type_mark.size();
  while (t_end < why.size() && (absl::ascii_isalnum(why[t_end]) || why[t_end] == '.' || why[t_end] == '_')) ++t_end;
  const google::protobuf::EnumDescriptor* e = google::protobuf::DescriptorPool::generated_pool()->FindEnumTypeByName(
      why.substr(t + type_mark.size(), t_end - t - type_mark.size()));
  if (e == nullptr || e->value_count() == 0) return "";
  // The value with the enum's prefix (OP_ERF for "erf", not OP_GELU_ERF),
  // else the one value that ends in it.
  const std::string& first = e->value(0)->name();
  const std::string prefix = first.substr(0, first.find('_') + 1);
  std::vector<std::string> ends;
  for (int i = 0; i < e->value_count(); ++i) {
    const std::string& name = e->value(i)->name();
    if (value.empty() || absl::EndsWith(name, "_UNSPECIFIED")) continue;
    if (name == value || name == prefix + value) return absl::StrCat(" (did you mean ", name, "?)");
    if (absl::EndsWith(name, "_" + value)) ends.push_back(name);
  }
  if (ends.size() == 1) return absl::StrCat(" (did you mean ", ends[0], "?)");
  std::vector<std::string> some;
  for (int i = 0; i < e->value_count() && some.size() < 6; ++i) {
    if (!absl::EndsWith(e->value(i)->name(), "_UNSPECIFIED")) some.push_back(e->value(i)->name());
  }
  return absl::StrCat(" (", e->name(), " values are written ", absl::StrJoin(some, ", "),
                      e->value_count() > static_cast<int>(some.size()) + 1 ? ", ..." : "", ")");
}

// The error for `json` (read from `what` as `msg`'s type) at `offset` (its
// line and column, and the line with a caret under it; npos: none known).
absl::Status Refused(const std::string& json, const std::string& what, const google::protobuf::Message& msg,
                     size_t offset, const std::string& why) {
  std::string where;
  std::string excerpt;
  if (offset != std::string::npos) {
    const Position p = PositionOf(json, offset);
    where = absl::StrCat(":", p.line, ":", p.column);
    const size_t begin = json.rfind('\n', offset == 0 ? 0 : offset - 1);
    const size_t line_start = begin == std::string::npos ? 0 : begin + 1;
    const size_t line_end = json.find('\n', line_start);
    const std::string line = json.substr(
        line_start,
        (line_end == std::string::npos ? json.size() : line_end) - line_start);
    if (line.size() <= 200) {
      excerpt = absl::StrCat("\n  ", line, "\n  ",
                             std::string(p.column - 1, ' '), "^");
    }
  }
  // A file read as a bare JSON object (a manifest) is just JSON to its reader.
  const std::string& type = msg.GetDescriptor()->full_name();
  return absl::InvalidArgumentError(absl::StrCat(
      what, where, ": ", type == "google.protobuf.Struct" ? "not a JSON object" : "not a valid " + type + " in JSON",
      ": ", why, excerpt));
}

}  // namespace

absl::Status ParseJson(const std::string& json, const std::string& what,
                       google::protobuf::Message* msg) {
  msg->Clear();
  KFUSE_RETURN_IF_ERROR(CheckJsonDepth(json, what));
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, msg, options);
  if (status.ok()) {
    // Well formed to protobuf, which forgives what a reader would not.
    auto [offset, why] = FirstLaxConstruct(json);
    if (offset == std::string::npos) return absl::OkStatus();
    msg->Clear();
    return Refused(json, what, *msg, offset, why);
  }
  // protobuf appends an excerpt with a caret; we give path:line:col and the
  // source line instead, which editors and readers can follow.
  std::string why(status.message());
  why = why.substr(0, why.find('\n'));
  why += EnumHint(why);
  return Refused(json, what, *msg, FirstSyntaxError(json), why);
}

std::string ToJson(const google::protobuf::Message& msg, bool pretty, bool with_defaults) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = pretty;
  options.always_print_primitive_fields = with_defaults;
  options.preserve_proto_field_names = false;
  std::string out;
  const auto status =
      google::protobuf::util::MessageToJsonString(msg, &out, options);
  // Printing a well-formed message cannot fail; a failure is our bug.
  KFUSE_CHECK(status.ok());
  return out;
}

absl::Status FileError(const std::string& what, int err) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InvalidArgumentError(message);
  }
}

absl::StatusOr<std::unique_ptr<std::ifstream>> OpenForReading(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return FileError(path, EISDIR);
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) return FileError(path, errno);
  return in;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  KFUSE_ASSIGN_OR_RETURN(std::unique_ptr<std::ifstream> in, OpenForReading(path));
  // Read in pieces up to the cap, so an endless input (/dev/zero, a pipe
  // that keeps writing) is refused rather than held in memory.
  std::string text;
  std::string chunk(1 << 16, '\0');
  while (in->read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in->gcount() > 0) {
    if (text.size() + static_cast<size_t>(in->gcount()) > kMaxReadFileBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", kMaxReadFileBytes >> 20, " MiB, which no chain, manifest or key file is"));
    }
    text.append(chunk.data(), static_cast<size_t>(in->gcount()));
  }
  if (in->bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return text;
}

absl::Status WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return FileError(absl::StrCat("cannot write ", path), errno);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("write failed: ", path));
  return absl::OkStatus();
}

absl::StatusOr<kfuse::v1::CompileRequest> ParseCompileRequest(
    const std::string& json, const std::string& what) {
  KFUSE_RETURN_IF_ERROR(CheckJsonDepth(json, what));
  google::protobuf::Struct top;
  google::protobuf::util::JsonParseOptions options;
  if (!google::protobuf::util::JsonStringToMessage(json, &top, options).ok()) {
    // Not a JSON object at all: let the typed parser word the error.
    kfuse::v1::Chain chain;
    KFUSE_RETURN_IF_ERROR(ParseJson(json, what, &chain));
  }
  kfuse::v1::CompileRequest request;
  if (top.fields().contains("chain")) {
    KFUSE_RETURN_IF_ERROR(ParseJson(json, what, &request));
  } else {
    KFUSE_RETURN_IF_ERROR(ParseJson(json, what, request.mutable_chain()));
  }
  return request;
}

absl::StatusOr<kfuse::v1::CompileRequest> LoadCompileRequest(
    const std::string& path) {
  KFUSE_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseCompileRequest(text, path);
}

}  // namespace kfuse::client
