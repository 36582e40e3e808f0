#include "clients/json.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
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

// Whether a line ends at text[i]: a \n, or a \r not before one (old Mac
// files), as editors count lines.
bool EndsLine(const std::string& text, size_t i) {
  return text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'));
}

// Columns count characters (UTF-8 sequences), as editors do, not bytes.
Position PositionOf(const std::string& text, size_t offset) {
  Position p;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (EndsLine(text, i)) {
      ++p.line;
      p.column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xc0) != 0x80) {
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
  char quote = '"';  // protobuf's parser takes single-quoted strings too.
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
          c == '"' || c == '\'' || c == '{' || c == '[' ||
          ((std::isalnum(static_cast<unsigned char>(c)) || c == '-') &&
           (prev == '"' || prev == '}' || prev == ']' ||
            (i > 0 && std::isspace(static_cast<unsigned char>(s[i - 1])))));
      if (after_value && starts_value) return i;
      prev = c == '\'' ? '"' : c;
    }
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        in_string = false;
      } else if (c == '\n') {
        return string_start;
      }
      continue;
    }
    switch (c) {
      case '"':
      case '\'':
        in_string = true;
        quote = c;
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

// What protobuf's parser forgives and a reader would not, found by walking
// the text it accepted beside the message type it filled:
// - a field an object gives twice, under any of its spellings (the parser
//   keeps the last, so a file that says a field twice is read as saying it
//   once): `weak_float` beside `weakFloat`, a key spelt with escapes, a
//   bare key; in a map or a JSON object (a Struct), a key given twice;
// - where a repeated field's list goes, an item alone (the parser reads it
//   as a list of one, the proto JSON mapping and Python's reader refuse
//   it); in the list, a list (the parser flattens `"axes": [[1], [2]]`
//   into `[1, 2]`) or a null (the parser drops it);
// - a comma that ends an object or a list.
// The walk also reads text protobuf's parser refused (to word a repeated
// key it refused without a place, and to find a request's top-level keys):
// it reads nothing past the text's end, and stops past kMaxJsonDepth.
class LaxWalk {
 public:
  // `keep_going`: walk the whole text past what is found (to read its
  // top-level keys) rather than stop at the first.
  explicit LaxWalk(const std::string& s, bool keep_going = false) : s_(s), keep_going_(keep_going) {}

  // The offset of the first such construct and what it is, or npos.
  // `root` null: the text is data (a JSON object read as a Struct), or its
  // type is not known yet. Text protobuf refused may be walked too: the
  // walk reads nothing past its end and stops past kMaxJsonDepth.
  std::pair<size_t, std::string> First(const google::protobuf::Descriptor* root) {
    Value(Fills(root, nullptr));
    return {at_, why_};
  }

  // The keys of the top-level object walked (as decoded).
  const std::set<std::string>& top_keys() const { return top_keys_; }

  // Also finds what protobuf's parser refuses without saying where: a key
  // that names no field, an enum value of no such name. For text protobuf
  // refused: it accepts some keys the walk does not know.
  void FindUnknown() { find_unknown_ = true; }

  // Records, for each object at `depth` (1: the top-level one), the span of
  // its `key`'s value: spans(), one an object in text order.
  void RecordSpans(const std::string& key, int depth) {
    span_key_ = key;
    span_depth_ = depth;
  }
  const std::vector<std::pair<size_t, size_t>>& spans() const { return spans_; }

 private:
  // What a JSON value fills: a message's fields (`message`), a map's
  // entries (`map_value`: the entries' value field), or data (neither: a
  // Struct or Value, a scalar). `field` is the field the value is given
  // for; `list` whether it is that repeated field's list.
  struct Slot {
    const google::protobuf::Descriptor* message = nullptr;
    const google::protobuf::FieldDescriptor* map_value = nullptr;
    const google::protobuf::FieldDescriptor* field = nullptr;
    bool list = false;
  };

  static Slot Fills(const google::protobuf::Descriptor* type, const google::protobuf::FieldDescriptor* field) {
    Slot slot;
    slot.field = field;
    if (type == nullptr) return slot;
    const std::string& name = type->full_name();
    if (name == "google.protobuf.Struct" || name == "google.protobuf.Value" ||
        name == "google.protobuf.ListValue") {
      return slot;
    }
    slot.message = type;
    return slot;
  }

  static Slot FieldSlot(const google::protobuf::FieldDescriptor* f) {
    if (f->is_map()) {
      Slot slot;
      slot.map_value = f->message_type()->map_value();
      slot.field = f;
      return slot;
    }
    Slot slot = Fills(f->message_type(), f);
    // A repeated Value or ListValue holds data, where nulls and lists are
    // items like any other.
    slot.list = f->is_repeated() && (f->message_type() == nullptr || slot.message != nullptr);
    return slot;
  }

  // The field `key` names as protobuf's parser reads it: by its name or
  // its JSON name.
  static const google::protobuf::FieldDescriptor* FieldNamed(const google::protobuf::Descriptor* d,
                                                             const std::string& key) {
    if (const google::protobuf::FieldDescriptor* f = d->FindFieldByName(key)) return f;
    for (int i = 0; i < d->field_count(); ++i) {
      if (d->field(i)->json_name() == key) return d->field(i);
    }
    return nullptr;
  }

  bool Fail(size_t at, std::string why) {
    if (at_ == std::string::npos) {
      at_ = at;
      why_ = std::move(why);
    }
    return keep_going_;
  }

  void Space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }

  // A bare word: a number, true, false, null, or an unquoted key.
  std::string Word() {
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' ||
                              s_[i_] == '$' || s_[i_] == '-' || s_[i_] == '+' || s_[i_] == '.')) {
      ++i_;
    }
    if (i_ == start) ++i_;  // Not a word: step over it.
    return s_.substr(start, i_ - start);
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      *out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      *out += static_cast<char>(0xc0 | (cp >> 6));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      *out += static_cast<char>(0xe0 | (cp >> 12));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      *out += static_cast<char>(0xf0 | (cp >> 18));
      *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      *out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // Four hex digits at i_ (consumed), or -1.
  int32_t Hex4() {
    if (i_ + 4 > s_.size()) return -1;
    int32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_ + k];
      if (!std::isxdigit(static_cast<unsigned char>(h))) return -1;
      v = v * 16 + (std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
    }
    i_ += 4;
    return v;
  }

  // The quoted string at i_ (either quote: protobuf's parser takes single
  // ones too), its escapes decoded; i_ ends past the closing quote.
  std::string String() {
    const char quote = s_[i_++];
    std::string out;
    while (i_ < s_.size() && s_[i_] != quote) {
      const char c = s_[i_++];
      if (c != '\\' || i_ >= s_.size()) {
        out += c;
        continue;
      }
      const char e = s_[i_++];
      switch (e) {
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          int32_t cp = Hex4();
          if (cp < 0) break;
          if (cp >= 0xd800 && cp < 0xdc00 && i_ + 1 < s_.size() && s_[i_] == '\\' && s_[i_ + 1] == 'u') {
            const size_t back = i_;
            i_ += 2;
            const int32_t low = Hex4();
            if (low >= 0xdc00 && low < 0xe000) {
              cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
            } else {
              i_ = back;
            }
          }
          AppendUtf8(static_cast<uint32_t>(cp), &out);
          break;
        }
        default: out += e;  // \" \\ \/ \'
      }
    }
    ++i_;
    return out;
  }

  // Whether the object or list ends here (at `close`, stepped over, or at
  // the text's end).
  bool Closes(char close) {
    Space();
    if (i_ >= s_.size()) return true;
    if (s_[i_] != close) return false;
    ++i_;
    return true;
  }

  // After an object's or a list's item: a comma may not end it.
  bool AfterItem() {
    Space();
    if (i_ < s_.size() && s_[i_] == ',') {
      const size_t comma = i_++;
      Space();
      if (i_ < s_.size() && (s_[i_] == '}' || s_[i_] == ']')) {
        return Fail(comma, absl::StrCat("a comma before '", std::string(1, s_[i_]), "'"));
      }
    }
    return true;
  }

  bool Object(const Slot& slot) {
    ++i_;  // '{'
    if (depth_ == span_depth_) spans_.emplace_back(std::string::npos, std::string::npos);
    std::map<std::string, std::string> seen;  // A field's name (or a key) -> its spelling here.
    while (true) {
      if (Closes('}')) return true;
      const size_t key_at = i_;
      const std::string key = s_[i_] == '"' || s_[i_] == '\'' ? String() : Word();
      Space();
      if (i_ < s_.size() && s_[i_] == ':') ++i_;
      Slot value;
      std::string identity = key;
      if (slot.map_value != nullptr) {
        value = FieldSlot(slot.map_value);
      } else if (slot.message != nullptr) {
        if (const google::protobuf::FieldDescriptor* f = FieldNamed(slot.message, key)) {
          identity = f->name();
          value = FieldSlot(f);
        } else if (find_unknown_ && !Fail(key_at, "no such field")) {
          return false;
        }
      }
      if (depth_ == 1) top_keys_.insert(key);
      auto [first, fresh] = seen.emplace(identity, key);
      if (!fresh) {
        const std::string shown = absl::CHexEscape(key.substr(0, 64));
        if (!Fail(key_at, absl::StrCat("the key \"", shown, "\" again in one object",
                                       first->second == key
                                           ? ""
                                           : absl::StrCat(", as \"", absl::CHexEscape(first->second.substr(0, 64)),
                                                          "\" before"),
                                       " (which one counts is not for a reader to guess)"))) {
          return false;
        }
      }
      Space();
      const size_t value_at = i_;
      const int depth = depth_;
      if (!Value(value)) return false;
      if (depth == span_depth_ && key == span_key_) spans_.back() = {value_at, i_};
      if (!AfterItem()) return false;
    }
  }

  bool List(const Slot& slot) {
    ++i_;  // '['
    Slot item = slot;
    item.list = false;
    while (true) {
      if (Closes(']')) return true;
      if (slot.list && s_[i_] == '[' &&
          !Fail(i_, absl::StrCat("a list inside the list \"", slot.field->json_name(), "\", whose items are ",
                                 slot.message != nullptr ? "objects" : "single values",
                                 " (a nested list would be read flattened)"))) {
        return false;
      }
      if (slot.list && s_.compare(i_, 4, "null") == 0 &&
          !Fail(i_, absl::StrCat("null in the list \"", slot.field->json_name(),
                                 "\" (it would be read as no item at all)"))) {
        return false;
      }
      if (!Value(item) || !AfterItem()) return false;
    }
  }

  bool Value(const Slot& slot) {
    Space();
    if (i_ >= s_.size()) return true;
    const char c = s_[i_];
    // One item alone where a list goes: the parser takes it as a list of
    // one, the proto JSON mapping (and Python's reader) does not.
    if (slot.list && c != '[' && s_.compare(i_, 4, "null") != 0 &&
        !Fail(i_, absl::StrCat("\"", slot.field->json_name(), "\" is a list: write its items in [ ]"))) {
      return false;
    }
    if (c == '{' || c == '[') {
      if (depth_ >= kMaxJsonDepth) return false;  // Past what CheckJsonDepth lets parsers see.
      ++depth_;
      const bool ok = c == '{' ? Object(slot) : List(slot);
      --depth_;
      return ok;
    }
    if (c == '"' || c == '\'') {
      const size_t at = i_;
      const std::string text = String();
      const google::protobuf::EnumDescriptor* e =
          slot.field != nullptr && !slot.list ? slot.field->enum_type() : nullptr;
      if (find_unknown_ && e != nullptr && e->FindValueByName(text) == nullptr && !Fail(at, "no such value")) {
        return false;
      }
    } else {
      Word();
    }
    return true;
  }

  const std::string& s_;
  const bool keep_going_;
  size_t i_ = 0;
  int depth_ = 0;
  std::set<std::string> top_keys_;
  size_t at_ = std::string::npos;
  std::string why_;
  bool find_unknown_ = false;
  std::string span_key_;
  int span_depth_ = -1;
  std::vector<std::pair<size_t, size_t>> spans_;
};

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
    size_t line_start = std::min(offset, json.size());
    while (line_start > 0 && !EndsLine(json, line_start - 1)) --line_start;
    size_t line_end = line_start;
    while (line_end < json.size() && json[line_end] != '\n' && json[line_end] != '\r') ++line_end;
    const std::string line = json.substr(line_start, line_end - line_start);
    if (line.size() <= 200) {
      // Under the line, a space for each character before the place (a tab
      // for a tab, so the caret lines up as the line is shown).
      std::string pad;
      for (size_t i = line_start; i < offset && i < json.size(); ++i) {
        const auto c = static_cast<unsigned char>(json[i]);
        if ((c & 0xc0) != 0x80) pad += c == '\t' ? '\t' : ' ';
      }
      excerpt = absl::StrCat("\n  ", line, "\n  ", pad, "^");
    }
  }
  // A file read as a bare JSON object (a manifest) is just JSON to its reader.
  const std::string& type = msg.GetDescriptor()->full_name();
  return absl::InvalidArgumentError(absl::StrCat(
      what, where, ": ", type == "google.protobuf.Struct" ? "not a JSON object" : "not a valid " + type + " in JSON",
      ": ", why, excerpt));
}

// The most of protobuf's message an error repeats.
constexpr size_t kMaxWhyBytes = 300;
// How deep a JSON object read as data (a manifest) may nest.
constexpr int kMaxDataDepth = 32;

// text[begin, end): `text` itself when that is all of it, else a copy in
// `*part`.
const std::string& Span(const std::string& text, size_t begin, size_t end, std::string* part) {
  if (begin == 0 && end == text.size()) return text;
  *part = text.substr(begin, end - begin);
  return *part;
}

// ParseJson of text[begin, end): errors give their line and column in
// `text`, and its line.
absl::Status ParseJsonIn(const std::string& text, size_t begin, size_t end, const std::string& what,
                         google::protobuf::Message* msg) {
  msg->Clear();
  std::string part;
  const std::string& json = Span(text, begin, end, &part);
  const auto refused = [&](size_t offset, const std::string& why) {
    return Refused(text, what, *msg, offset == std::string::npos ? offset : begin + offset, why);
  };
  // A JSON object read as data costs protobuf three levels of message
  // each (Struct, Value, Struct): past 32 its parser fails without a word
  // of why.
  const bool data = msg->GetDescriptor()->full_name() == "google.protobuf.Struct";
  KFUSE_RETURN_IF_ERROR(CheckJsonDepth(json, what, data ? kMaxDataDepth : kMaxJsonDepth));
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, msg, options);
  if (status.ok()) {
    // Well formed to protobuf, which forgives what a reader would not.
    auto [offset, why] = LaxWalk(json).First(msg->GetDescriptor());
    if (offset == std::string::npos) return absl::OkStatus();
    msg->Clear();
    return refused(offset, why);
  }
  // A key given twice where protobuf refuses it itself (a Struct's, a
  // oneof's), before any syntax error: said as the walk says it, with its
  // line and column, where protobuf's word has neither.
  const size_t syntax = FirstSyntaxError(json);
  auto [offset, lax] = LaxWalk(json).First(msg->GetDescriptor());
  if (offset != std::string::npos && (syntax == std::string::npos || offset < syntax)) {
    return refused(offset, lax);
  }
  // protobuf appends an excerpt with a caret; we give path:line:col and the
  // source line instead, which editors and readers can follow.
  std::string why(status.message());
  why = why.substr(0, why.find('\n'));
  why += EnumHint(why);
  // protobuf's word quotes the key or value it refused, which the text may
  // make as long as it likes.
  if (why.size() > kMaxWhyBytes) {
    size_t cut = kMaxWhyBytes;
    while (cut > 0 && (static_cast<unsigned char>(why[cut]) & 0xc0) == 0x80) --cut;  // Whole characters.
    why = absl::StrCat(why.substr(0, cut), "... (cut)");
  }
  if (syntax == std::string::npos) {
    // Well formed but refused: an unknown field or enum value, which
    // protobuf names without its place.
    LaxWalk unknown(json);
    unknown.FindUnknown();
    return refused(unknown.First(msg->GetDescriptor()).first, why);
  }
  return refused(syntax, why);
}

}  // namespace

absl::Status ParseJson(const std::string& json, const std::string& what,
                       google::protobuf::Message* msg) {
  return ParseJsonIn(json, 0, json.size(), what, msg);
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
  return ParseCompileRequestIn(json, 0, json.size(), what);
}

absl::StatusOr<kfuse::v1::CompileRequest> ParseCompileRequestIn(const std::string& text, size_t begin, size_t end,
                                                                const std::string& what) {
  if (begin > end || end > text.size()) return absl::InvalidArgumentError(absl::StrCat(what, ": no such span"));
  std::string part;
  const std::string& json = Span(text, begin, end, &part);
  KFUSE_RETURN_IF_ERROR(CheckJsonDepth(json, what));
  // A request has a top-level "chain"; anything else (not an object at all
  // included) is read as a Chain, whose parser words what is wrong.
  LaxWalk keys(json, /*keep_going=*/true);
  keys.First(nullptr);
  kfuse::v1::CompileRequest request;
  if (keys.top_keys().count("chain") > 0) {
    KFUSE_RETURN_IF_ERROR(ParseJsonIn(text, begin, end, what, &request));
    request.mutable_chain();  // "chain": null is a chain of nothing, as {} is.
  } else {
    KFUSE_RETURN_IF_ERROR(ParseJsonIn(text, begin, end, what, request.mutable_chain()));
  }
  return request;
}

std::vector<std::pair<size_t, size_t>> JsonValueSpans(const std::string& json, const std::string& key, int depth) {
  LaxWalk walk(json, /*keep_going=*/true);
  walk.RecordSpans(key, depth);
  walk.First(nullptr);
  return walk.spans();
}

absl::StatusOr<kfuse::v1::CompileRequest> LoadCompileRequest(
    const std::string& path) {
  KFUSE_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseCompileRequest(text, path);
}

}  // namespace kfuse::client
