// The proto3 JSON mapping for kfuse.v1 messages, with errors a user can act
// on: the CLI, the examples and the latency tool read chains through here.
//
//   KFUSE_ASSIGN_OR_RETURN(kfuse::v1::CompileRequest req,
//                          kfuse::client::LoadCompileRequest("chain.json"));
//   std::string text = kfuse::client::ToJson(req.chain());
#ifndef KFUSE_CLIENTS_JSON_H_
#define KFUSE_CLIENTS_JSON_H_

#include <cstddef>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse::client {

// Parses `json` into `msg` (cleared first). Unknown fields are errors so a
// misspelt field is reported instead of silently dropped. `what` names the
// source ("chain.json") in the message; syntax errors give line and column.
absl::Status ParseJson(const std::string& json, const std::string& what,
                       google::protobuf::Message* msg);

// The message in the proto3 JSON mapping; `pretty` indents with two spaces.
// Enum values print as names; fields with default values are omitted
// unless `with_defaults`.
// `with_defaults`: zero and empty fields printed too (proto3 leaves them
// out), for summaries whose counts scripts read.
std::string ToJson(const google::protobuf::Message& msg, bool pretty = true, bool with_defaults = false);

// A failed file operation as a status whose code follows errno: NOT_FOUND
// for a missing file or directory, PERMISSION_DENIED for access, else
// INVALID_ARGUMENT; the message is `what: strerror(err)`.
absl::Status FileError(const std::string& what, int err);

// `path` opened for reading, binary; a directory is refused as EISDIR (an
// ifstream opens one and reads it as empty). Errors as FileError(path, ...).
absl::StatusOr<std::unique_ptr<std::ifstream>> OpenForReading(const std::string& path);
// The most ReadFile reads: far past any chain, manifest or key file.
inline constexpr size_t kMaxReadFileBytes = size_t{256} << 20;
// Whole file contents; NOT_FOUND / PERMISSION_DENIED name the path; one
// longer than kMaxReadFileBytes is INVALID_ARGUMENT.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes (truncates) `path`; the error names the path.
absl::Status WriteFile(const std::string& path, const std::string& contents);

// A CompileRequest from JSON text: a full request when the top-level object
// has a "chain" key, else a bare kfuse.v1.Chain wrapped in a request.
absl::StatusOr<kfuse::v1::CompileRequest> ParseCompileRequest(
    const std::string& json, const std::string& what);
// As ParseCompileRequest, of the request written at text[begin, end) (a
// chain inline in a manifest): errors give their line and column in `text`.
absl::StatusOr<kfuse::v1::CompileRequest> ParseCompileRequestIn(const std::string& text, size_t begin, size_t end,
                                                                const std::string& what);
// The [begin, end) span in `json` of `key`'s value in each object nested
// `depth` deep (1: the top-level object), one an object in text order
// ({npos, npos} for one without the key). For text a parser accepted.
std::vector<std::pair<size_t, size_t>> JsonValueSpans(const std::string& json, const std::string& key, int depth);
// As ParseCompileRequest, reading the file at `path`.
absl::StatusOr<kfuse::v1::CompileRequest> LoadCompileRequest(
    const std::string& path);

}  // namespace kfuse::client

#endif  // KFUSE_CLIENTS_JSON_H_
