// A message's bytes in protobuf's deterministic serialization: fields in
// number order, map entries sorted by key. Within one build the same
// message gives the same bytes, so they can be hashed or compared.
//
//   Sha256Hex(DeterministicBytes(request.chain()))
#ifndef KFUSE_CORE_PROTO_BYTES_H_
#define KFUSE_CORE_PROTO_BYTES_H_

#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message_lite.h"

namespace kfuse {

inline std::string DeterministicBytes(const google::protobuf::MessageLite& m) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
  }
  return out;
}

}  // namespace kfuse

#endif  // KFUSE_CORE_PROTO_BYTES_H_
