// Fuzzes the command line's JSON door on text: ParseCompileRequest (a chain
// file: a Chain, or a CompileRequest with its chain) and ParseJson into a
// Struct (a manifest). Both run protobuf's parser and then walk the text
// for what it forgives (clients/json.cc), also on text it refused. Seeds
// are the example chain files (examples/*.json).
//
// Invariants (a violation traps): refusals are InvalidArgument with a
// message; an accepted request printed back as JSON parses again to the
// same request (so nothing the walk allows reads two ways).
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "clients/json.h"
#include "core/proto_bytes.h"
#include "google/protobuf/struct.pb.h"
#include "kfuse/v1/kfuse.pb.h"
#include "tests/fuzz/fuzz_check.h"

namespace kfuse::fuzz {
namespace {

bool IsRefusal(const absl::Status& s) {
  return s.code() == absl::StatusCode::kInvalidArgument && !s.message().empty();
}

}  // namespace
}  // namespace kfuse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kfuse::fuzz;  // NOLINT
  const std::string text(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<kfuse::v1::CompileRequest> request = kfuse::client::ParseCompileRequest(text, "f.json");
  if (!request.ok()) {
    FUZZ_CHECK(IsRefusal(request.status()), "a chain file refused as " << request.status());
  } else {
    const std::string again_text = kfuse::client::ToJson(*request, /*pretty=*/false);
    absl::StatusOr<kfuse::v1::CompileRequest> again = kfuse::client::ParseCompileRequest(again_text, "again.json");
    FUZZ_CHECK(again.ok(), "the accepted request printed back is refused: " << again.status() << "\n"
                                                                            << again_text);
    FUZZ_CHECK(kfuse::DeterministicBytes(*again) == kfuse::DeterministicBytes(*request),
               "the accepted request printed back reads as another: " << again_text);
  }

  google::protobuf::Struct manifest;
  const absl::Status s = kfuse::client::ParseJson(text, "m.json", &manifest);
  FUZZ_CHECK(s.ok() || IsRefusal(s), "a manifest refused as " << s);
  return 0;
}
