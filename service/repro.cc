#include "service/repro.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "codegen/canonicalize.h"
#include "core/json_depth.h"
#include "core/status.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "service/translate.h"

namespace kfuse {
namespace {

namespace fs = std::filesystem;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr char kFormat[] = "kfuse.repro/1";
constexpr ReproKind kKinds[] = {ReproKind::kCompileError, ReproKind::kWrongResult, ReproKind::kFault,
                                ReproKind::kTimeout};
constexpr Numerics kNumerics[] = {Numerics::kFast, Numerics::kReference64, Numerics::kEager};
// Larger files are not read back: a bundle's files are capped when written.
constexpr int64_t kMaxReadBytes = int64_t{64} << 20;

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  return absl::PermissionDeniedError(absl::StrCat(what, " ", path, ": ", std::strerror(errno)));
}

// Text for a JSON string: valid UTF-8 (anything else becomes '?'), at most
// `max` bytes, cut at a character boundary. Sets *cut when shortened.
std::string SafeText(absl::string_view s, size_t max, bool* cut) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool valid = len > 0 && i + len <= s.size();
    for (size_t k = 1; valid && k < len; ++k) valid = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    const size_t n = valid ? len : 1;
    if (out.size() + n > max) {
      *cut = true;
      break;
    }
    if (valid) {
      out.append(s.data() + i, len);
    } else {
      out.push_back('?');
    }
    i += n;
  }
  return out;
}

// Creates `path` (which must not exist; links are not followed) with `bytes`.
absl::Status WriteNewFile(const std::string& path, absl::string_view bytes) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("cannot create", path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = ErrnoError("cannot write", path);
      close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return ErrnoError("cannot write", path);
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", ec.message()));
  if (size > static_cast<uintmax_t>(kMaxReadBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", size, " bytes is too large for a bundle file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string VariantText(const Variant& v) {
  return absl::StrCat(v.ToString(), "\nfamily: ", std::string(FamilyName(v.family)), "\n");
}

// The first hex digits of the key: the only part of a name a request decides.
std::string KeyPrefix(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (out.size() == 12 || !absl::ascii_isxdigit(static_cast<unsigned char>(c))) break;
    out.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  return out.empty() ? "nokey" : out;
}

Value Num(double v) {
  Value out;
  out.set_number_value(v);
  return out;
}
Value Str(absl::string_view s) {
  Value out;
  bool cut = false;
  out.set_string_value(SafeText(s, s.size(), &cut));
  return out;
}

Struct DeviceJson(const DeviceFingerprint& d) {
  Struct s;
  auto& f = *s.mutable_fields();
  f["name"] = Str(d.name);
  f["cc_major"] = Num(d.cc_major);
  f["cc_minor"] = Num(d.cc_minor);
  f["sm_count"] = Num(d.sm_count);
  f["sm_clock_khz"] = Num(d.sm_clock_khz);
  f["mem_clock_khz"] = Num(d.mem_clock_khz);
  f["mem_bus_width_bits"] = Num(d.mem_bus_width_bits);
  f["l2_bytes"] = Num(static_cast<double>(d.l2_bytes));
  f["memory_bytes"] = Num(static_cast<double>(d.memory_bytes));
  f["power_limit_mw"] = Num(d.power_limit_mw);
  f["ecc"].set_bool_value(d.ecc);
  f["mig"].set_bool_value(d.mig);
  f["digest"] = Str(d.Digest());
  return s;
}

using InfoFields = std::vector<std::pair<const char*, Value>>;

// info.json's fields, in the order a reader wants them; the message is cut
// to `max_message` bytes.
InfoFields InfoJson(const ReproInfo& info, const std::vector<std::string>& omitted, size_t max_message) {
  InfoFields f;
  f.emplace_back("kind", Str(ReproKindName(info.kind)));
  bool cut = false;
  f.emplace_back("message", Str(SafeText(info.message, max_message, &cut)));
  if (cut) f.emplace_back("message_truncated", Value()).second.set_bool_value(true);
  f.emplace_back("variant", Str(info.variant.ToString()));
  f.emplace_back("family", Str(std::string(FamilyName(info.variant.family))));
  f.emplace_back("numerics", Str(NumericsName(info.numerics)));
  f.emplace_back("entry", Str(info.entry));
  f.emplace_back("kernel_index", Num(info.kernel_index));
  f.emplace_back("key", Str(info.key));
  Value& symbols = f.emplace_back("symbol_values", Value()).second;
  symbols.mutable_list_value();
  for (int64_t v : info.symbol_values)
    *symbols.mutable_list_value()->add_values() = Num(static_cast<double>(v));
  Value& versions = f.emplace_back("versions", Value()).second;
  auto& vf = *versions.mutable_struct_value()->mutable_fields();
  vf["kfuse"] = Str(info.kfuse_version);
  vf["generator"] = Str(info.generator_version);
  vf["nvrtc"] = Str(info.nvrtc_version);
  if (info.driver_version != 0) vf["driver"] = Num(info.driver_version);
  Value& compile = f.emplace_back("compile", Value()).second;
  auto& cf = *compile.mutable_struct_value()->mutable_fields();
  cf["arch"] = Str(info.arch);
  cf["options"].mutable_list_value();
  for (const std::string& o : info.compile_options)
    *cf["options"].mutable_list_value()->add_values() = Str(o);
  if (info.device)
    *f.emplace_back("device", Value()).second.mutable_struct_value() = DeviceJson(*info.device);
  if (!omitted.empty()) {
    Value& list = f.emplace_back("omitted", Value()).second;
    for (const std::string& o : omitted) *list.mutable_list_value()->add_values() = Str(o);
  }
  f.emplace_back("created_utc", Str(absl::FormatTime(absl::RFC3339_full, info.time, absl::UTCTimeZone())));
  f.emplace_back("format", Str(kFormat));
  return f;
}

absl::StatusOr<std::string> ToJsonText(const google::protobuf::Message& m, bool pretty = true) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = pretty;
  std::string out;
  auto s = google::protobuf::util::MessageToJsonString(m, &out, o);
  if (!s.ok()) return absl::InternalError(absl::StrCat("JSON printing: ", s.ToString()));
  return out;
}

// One field a line, in order; names are ours, values printed (and escaped)
// by protobuf.
absl::StatusOr<std::string> InfoText(const InfoFields& fields) {
  std::string out = "{\n";
  for (size_t i = 0; i < fields.size(); ++i) {
    KFUSE_ASSIGN_OR_RETURN(std::string value, ToJsonText(fields[i].second, /*pretty=*/false));
    absl::StrAppend(&out, "  \"", fields[i].first, "\": ", value, i + 1 < fields.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

std::string OverCap(const char* file, size_t size, int64_t cap) {
  return absl::StrCat(file, ": ", size, " bytes, over the ", cap, "-byte cap");
}

// Removes the oldest bundles (by name, which starts with the time) beyond `keep`.
void Rotate(const std::string& root, int keep) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (IsReproBundleName(name) && e.is_directory(ec) && !e.is_symlink(ec)) names.push_back(name);
  }
  if (static_cast<int>(names.size()) <= keep) return;
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i + keep < names.size(); ++i) {
    fs::remove_all(fs::path(root) / names[i], ec);  // Raced by another writer: fine.
  }
}

// Typed reads of info.json fields; errors name the field.
absl::Status FieldError(absl::string_view field, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("info.json: ", field, ": expected ", want));
}
absl::StatusOr<std::string> GetString(const Struct& s, absl::string_view field, bool required) {
  auto it = s.fields().find(std::string(field));
  if (it == s.fields().end()) {
    if (required) return FieldError(field, "a string");
    return std::string();
  }
  if (it->second.kind_case() != Value::kStringValue) return FieldError(field, "a string");
  return it->second.string_value();
}
absl::StatusOr<int64_t> IntOf(const Value& v, absl::string_view field) {
  const double x = v.number_value();
  if (v.kind_case() != Value::kNumberValue || !(std::abs(x) < 9.0e15) ||
      x != static_cast<double>(static_cast<int64_t>(x)))
    return FieldError(field, "an integer");
  return static_cast<int64_t>(x);
}
absl::StatusOr<int64_t> GetInt(const Struct& s, absl::string_view field, bool required) {
  auto it = s.fields().find(std::string(field));
  if (it == s.fields().end()) {
    if (required) return FieldError(field, "an integer");
    return 0;
  }
  return IntOf(it->second, field);
}
const Struct* GetStruct(const Struct& s, absl::string_view field) {
  auto it = s.fields().find(std::string(field));
  return it != s.fields().end() && it->second.has_struct_value() ? &it->second.struct_value() : nullptr;
}
absl::StatusOr<std::vector<std::string>> GetStrings(const Struct& s, absl::string_view field) {
  std::vector<std::string> out;
  auto it = s.fields().find(std::string(field));
  if (it == s.fields().end()) return out;
  if (!it->second.has_list_value()) return FieldError(field, "a list of strings");
  for (const Value& v : it->second.list_value().values()) {
    if (v.kind_case() != Value::kStringValue) return FieldError(field, "a list of strings");
    out.push_back(v.string_value());
  }
  return out;
}

absl::StatusOr<DeviceFingerprint> ReadDevice(const Struct& s) {
  DeviceFingerprint d;
  KFUSE_ASSIGN_OR_RETURN(d.name, GetString(s, "name", true));
  const std::pair<const char*, int*> ints[] = {{"cc_major", &d.cc_major},
                                               {"cc_minor", &d.cc_minor},
                                               {"sm_count", &d.sm_count},
                                               {"sm_clock_khz", &d.sm_clock_khz},
                                               {"mem_clock_khz", &d.mem_clock_khz},
                                               {"mem_bus_width_bits", &d.mem_bus_width_bits},
                                               {"power_limit_mw", &d.power_limit_mw}};
  for (const auto& [name, out] : ints) {
    KFUSE_ASSIGN_OR_RETURN(int64_t v, GetInt(s, name, false));
    *out = static_cast<int>(v);
  }
  KFUSE_ASSIGN_OR_RETURN(d.l2_bytes, GetInt(s, "l2_bytes", false));
  KFUSE_ASSIGN_OR_RETURN(d.memory_bytes, GetInt(s, "memory_bytes", false));
  auto flag = [&](const char* name) {
    auto it = s.fields().find(name);
    return it != s.fields().end() && it->second.bool_value();
  };
  d.ecc = flag("ecc");
  d.mig = flag("mig");
  return d;
}

absl::Status ParseInfo(const Struct& s, ReproInfo& info) {
  KFUSE_ASSIGN_OR_RETURN(std::string kind, GetString(s, "kind", true));
  bool known = false;
  for (ReproKind k : kKinds) {
    if (kind == ReproKindName(k)) info.kind = k, known = true;
  }
  if (!known) return FieldError("kind", "compile_error, wrong_result, fault or timeout");
  KFUSE_ASSIGN_OR_RETURN(info.message, GetString(s, "message", false));
  KFUSE_ASSIGN_OR_RETURN(info.key, GetString(s, "key", false));
  KFUSE_ASSIGN_OR_RETURN(int64_t index, GetInt(s, "kernel_index", true));
  if (index < 0 || index > 4096) return FieldError("kernel_index", "a kernel's position in the plan");
  info.kernel_index = static_cast<int>(index);
  KFUSE_ASSIGN_OR_RETURN(info.entry, GetString(s, "entry", false));
  KFUSE_ASSIGN_OR_RETURN(std::string numerics, GetString(s, "numerics", false));
  if (!numerics.empty()) {
    known = false;
    for (Numerics n : kNumerics) {
      if (numerics == NumericsName(n)) info.numerics = n, known = true;
    }
    if (!known) return FieldError("numerics", "fast, reference64 or eager");
  }
  if (auto it = s.fields().find("symbol_values"); it != s.fields().end()) {
    for (const Value& v : it->second.list_value().values()) {
      KFUSE_ASSIGN_OR_RETURN(int64_t x, IntOf(v, "symbol_values"));
      info.symbol_values.push_back(x);
    }
  }
  if (const Struct* v = GetStruct(s, "versions")) {
    KFUSE_ASSIGN_OR_RETURN(info.kfuse_version, GetString(*v, "kfuse", false));
    KFUSE_ASSIGN_OR_RETURN(info.generator_version, GetString(*v, "generator", false));
    KFUSE_ASSIGN_OR_RETURN(info.nvrtc_version, GetString(*v, "nvrtc", false));
    KFUSE_ASSIGN_OR_RETURN(int64_t driver, GetInt(*v, "driver", false));
    info.driver_version = static_cast<uint32_t>(driver);
  }
  const Struct* compile = GetStruct(s, "compile");
  if (compile == nullptr) return FieldError("compile", "an object with the arch");
  KFUSE_ASSIGN_OR_RETURN(info.arch, GetString(*compile, "arch", true));
  KFUSE_ASSIGN_OR_RETURN(info.compile_options, GetStrings(*compile, "options"));
  if (const Struct* d = GetStruct(s, "device")) {
    KFUSE_ASSIGN_OR_RETURN(info.device, ReadDevice(*d));
  }
  KFUSE_ASSIGN_OR_RETURN(std::string created, GetString(s, "created_utc", false));
  std::string err;
  if (!created.empty() && !absl::ParseTime(absl::RFC3339_full, created, &info.time, &err))
    return FieldError("created_utc", "an RFC 3339 time");
  KFUSE_ASSIGN_OR_RETURN(info.omitted, GetStrings(s, "omitted"));
  auto cut = s.fields().find("message_truncated");
  info.message_truncated = cut != s.fields().end() && cut->second.bool_value();
  return absl::OkStatus();
}

}  // namespace

absl::string_view ReproKindName(ReproKind k) {
  switch (k) {
    case ReproKind::kCompileError:
      return "compile_error";
    case ReproKind::kWrongResult:
      return "wrong_result";
    case ReproKind::kFault:
      return "fault";
    case ReproKind::kTimeout:
      return "timeout";
  }
  return "unknown";
}

std::optional<ReproKind> ReproKindOf(Outcome o) {
  switch (o) {
    case Outcome::kCompileError:
      return ReproKind::kCompileError;
    case Outcome::kWrongResult:
      return ReproKind::kWrongResult;
    case Outcome::kFault:
      return ReproKind::kFault;
    case Outcome::kTimeout:
      return ReproKind::kTimeout;
    default:
      return std::nullopt;
  }
}

bool IsReproBundleName(absl::string_view name) {
  // 20250102T030405.123456Z-<hex>-<kind>-<n>
  std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  if (parts.size() != 4) return false;
  const absl::string_view t = parts[0];
  if (t.size() != 23 || t[8] != 'T' || t[15] != '.' || t[22] != 'Z') return false;
  for (size_t i : {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 16, 17, 18, 19, 20, 21})
    if (!absl::ascii_isdigit(static_cast<unsigned char>(t[i]))) return false;
  if (parts[1].empty() || parts[1].size() > 12) return false;
  for (char c : parts[1])
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) return false;
  bool kind = false;
  for (ReproKind k : kKinds) kind |= parts[2] == ReproKindName(k);
  uint64_t n = 0;
  return kind && absl::SimpleAtoi(parts[3], &n) && absl::StrCat(n) == parts[3];
}

absl::StatusOr<std::string> WriteReproBundle(const std::string& root, const ReproInfo& info,
                                             const ReproLimits& limits) {
  if (root.empty()) return absl::InvalidArgumentError("repro bundle root: empty path");
  std::error_code ec;
  // Bundles hold clients' chains: a root made here is the server user's only.
  if (fs::create_directories(root, ec)) fs::permissions(root, fs::perms::owner_all, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", root, ": ", ec.message()));
  const int64_t cap = std::max<int64_t>(limits.max_file_bytes, 1024);

  // The files, each under the cap; what does not fit is noted, not cut (a
  // cut chain or source would replay something else).
  std::vector<std::pair<const char*, std::string>> files;
  std::vector<std::string> omitted;
  KFUSE_ASSIGN_OR_RETURN(std::string chain, ToJsonText(info.chain));
  if (static_cast<int64_t>(chain.size()) <= cap) {
    files.emplace_back("chain.json", std::move(chain));
  } else {
    omitted.push_back(OverCap("chain.json", chain.size(), cap));
  }
  files.emplace_back("variant.txt", VariantText(info.variant));
  if (static_cast<int64_t>(info.source.size()) > cap) {
    omitted.push_back(OverCap("kernel.cu", info.source.size(), cap));
  } else if (!info.source.empty()) {
    files.emplace_back("kernel.cu", info.source);
  }
  // Escaping can grow a message: shorter ones until info.json fits.
  std::string text;
  for (size_t max_message : {static_cast<size_t>(cap / 2), size_t{512}, size_t{0}}) {
    KFUSE_ASSIGN_OR_RETURN(text, InfoText(InfoJson(info, omitted, max_message)));
    if (static_cast<int64_t>(text.size()) <= cap) break;
  }
  files.emplace_back("info.json", std::move(text));

  // Written aside, then renamed into place: readers and rotation only ever
  // see whole bundles.
  static std::atomic<uint64_t> counter{0};
  const std::string stem = absl::StrCat(absl::FormatTime("%Y%m%dT%H%M%E6SZ", info.time, absl::UTCTimeZone()),
                                        "-", KeyPrefix(info.key), "-", ReproKindName(info.kind), "-");
  const uint64_t n = counter.fetch_add(1);
  const std::string tmp = absl::StrCat(root, "/.tmp-", getpid(), "-", n);
  if (mkdir(tmp.c_str(), 0700) != 0) return ErrnoError("cannot create", tmp);
  for (const auto& [name, bytes] : files) {
    absl::Status s = WriteNewFile(absl::StrCat(tmp, "/", name), bytes);
    if (!s.ok()) {
      fs::remove_all(tmp, ec);
      return s;
    }
  }
  std::string dir;
  for (uint64_t attempt = n;; attempt = counter.fetch_add(1)) {
    dir = absl::StrCat(root, "/", stem, attempt);
    if (rename(tmp.c_str(), dir.c_str()) == 0) break;
    if ((errno != EEXIST && errno != ENOTEMPTY) || attempt > n + 64) {
      absl::Status s = ErrnoError("cannot rename into place", dir);
      fs::remove_all(tmp, ec);
      return s;
    }
  }
  Rotate(root, std::max(1, limits.max_bundles));
  return dir;
}

absl::StatusOr<ReproInfo> ReadReproBundle(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not a directory (a repro bundle is one)"));
  }
  ReproInfo info;
  KFUSE_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(dir + "/info.json"));
  KFUSE_RETURN_IF_ERROR(CheckJsonDepth(text, "info.json"));
  Struct s;
  google::protobuf::util::JsonParseOptions strict;
  if (auto st = google::protobuf::util::JsonStringToMessage(text, &s, strict); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("info.json: ", std::string(st.message())));
  }
  KFUSE_RETURN_IF_ERROR(ParseInfo(s, info));

  KFUSE_ASSIGN_OR_RETURN(std::string variant, ReadSmallFile(dir + "/variant.txt"));
  const absl::string_view first = absl::string_view(variant).substr(0, variant.find('\n'));
  absl::StatusOr<Variant> v = ParseVariant(absl::StripAsciiWhitespace(first));
  if (!v.ok()) return absl::InvalidArgumentError(absl::StrCat("variant.txt: ", v.status().message()));
  info.variant = *std::move(v);

  if (fs::exists(dir + "/chain.json", ec)) {
    KFUSE_ASSIGN_OR_RETURN(std::string chain, ReadSmallFile(dir + "/chain.json"));
    KFUSE_RETURN_IF_ERROR(CheckJsonDepth(chain, "chain.json"));
    if (auto st = google::protobuf::util::JsonStringToMessage(chain, &info.chain, strict); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("chain.json: ", std::string(st.message())));
    }
  }
  if (fs::exists(dir + "/kernel.cu", ec)) {
    KFUSE_ASSIGN_OR_RETURN(info.source, ReadSmallFile(dir + "/kernel.cu"));
  }
  return info;
}

absl::StatusOr<ReproKernel> ReproKernelOf(const ReproInfo& info) {
  if (info.chain.ops_size() == 0 && info.chain.inputs_size() == 0) {
    return absl::FailedPreconditionError("the bundle has no chain.json (see info.json: omitted)");
  }
  ReproKernel k;
  KFUSE_ASSIGN_OR_RETURN(Chain typed, TranslateChain(info.chain));
  k.chain = Canonicalize(typed);
  KFUSE_ASSIGN_OR_RETURN(Partition part, PartitionChain(k.chain));
  if (info.kernel_index >= static_cast<int>(part.kernels.size())) {
    return absl::InvalidArgumentError(absl::StrCat("info.json: kernel_index: ", info.kernel_index,
                                                   " but the chain's plan has ", part.kernels.size(),
                                                   " kernel(s) with this build"));
  }
  k.group = part.kernels[info.kernel_index];
  return k;
}

absl::StatusOr<Variant> ParseVariant(absl::string_view text) {
  const size_t open = text.find('{');
  if (open == absl::string_view::npos || text.empty() || text.back() != '}') {
    return absl::InvalidArgumentError(absl::StrCat("variant '", text, "': expected family{name=value,...}"));
  }
  Variant v;
  const absl::string_view family = text.substr(0, open);
  v.family = FamilyFromName(std::string_view(family.data(), family.size()));
  if (v.family == Family::kInvalid) {
    return absl::InvalidArgumentError(absl::StrCat("variant: unknown family '", family, "'"));
  }
  const absl::string_view body = text.substr(open + 1, text.size() - open - 2);
  if (body.empty()) return v;
  for (absl::string_view param : absl::StrSplit(body, ',')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(param, absl::MaxSplits('=', 1));
    kv.first = absl::StripAsciiWhitespace(kv.first);
    int64_t value = 0;
    bool name_ok = !kv.first.empty();
    for (char c : kv.first) name_ok &= absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
    if (!name_ok || !absl::SimpleAtoi(kv.second, &value) || !v.params.emplace(kv.first, value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant: parameter '", param, "': expected name=integer, once"));
    }
  }
  return v;
}

}  // namespace kfuse
