// Conversions between the protobuf-free core types and the kfuse.v1 wire
// types. Only service/ and clients/ see generated protobuf code; this is the
// one place the two vocabularies meet.
#ifndef KFUSE_SERVICE_CONVERT_H_
#define KFUSE_SERVICE_CONVERT_H_

#include "absl/status/statusor.h"
#include "core/launch.h"
#include "core/roofline.h"
#include "core/trial.h"
#include "kfuse/v1/kfuse.pb.h"

namespace kfuse {

v1::Expr ToProto(const SizeExpr& e);
v1::Dim3 ToProto(const Dim3Expr& d);
v1::BufferRef ToProto(const BufferRef& b);
v1::Param ToProto(const KernelParam& p);
v1::Precondition ToProto(const Precondition& p);
v1::Variant ToProto(const Variant& v);
v1::Resources ToProto(const Resources& r);
v1::RooflineReport ToProto(const RooflineReport& r);
v1::Trial ToProto(const Trial& t);
v1::DeviceFingerprint ToProto(const DeviceFingerprint& d);
v1::Ceilings ToProto(const Ceilings& c);
// A compiled kernel with its launch contract, as served.
v1::Kernel ToProto(const CompiledKernel& k, bool include_source);

absl::StatusOr<Variant> FromProto(const v1::Variant& v);
Ceilings FromProto(const v1::Ceilings& c);

}  // namespace kfuse

#endif  // KFUSE_SERVICE_CONVERT_H_
