#include "service/convert.h"

#include "absl/status/status.h"

namespace kfuse {

v1::Expr ToProto(const SizeExpr& e) {
  v1::Expr out;
  using K = SizeExpr::Kind;
  switch (e.kind()) {
    case K::kConst: out.set_constant(e.value()); return out;
    case K::kSymbol: out.set_symbol(static_cast<uint32_t>(e.value())); return out;
    default: break;
  }
  v1::Expr::Binary* b = out.mutable_binary();
  switch (e.kind()) {
    case K::kAdd: b->set_op(v1::Expr::OP_ADD); break;
    case K::kSub: b->set_op(v1::Expr::OP_SUB); break;
    case K::kMul: b->set_op(v1::Expr::OP_MUL); break;
    case K::kCeilDiv: b->set_op(v1::Expr::OP_CEIL_DIV); break;
    case K::kMin: b->set_op(v1::Expr::OP_MIN); break;
    case K::kMax: b->set_op(v1::Expr::OP_MAX); break;
    default: break;
  }
  *b->mutable_lhs() = ToProto(e.lhs());
  *b->mutable_rhs() = ToProto(e.rhs());
  return out;
}

v1::Dim3 ToProto(const Dim3Expr& d) {
  v1::Dim3 out;
  *out.mutable_x() = ToProto(d.x);
  *out.mutable_y() = ToProto(d.y);
  *out.mutable_z() = ToProto(d.z);
  return out;
}

v1::BufferRef ToProto(const BufferRef& b) {
  v1::BufferRef out;
  switch (b.kind) {
    case BufferRef::Kind::kInput: out.set_input(b.index); break;
    case BufferRef::Kind::kOutput: out.set_output(b.index); break;
    case BufferRef::Kind::kIntermediate: out.set_intermediate(b.index); break;
  }
  return out;
}

v1::Param ToProto(const KernelParam& p) {
  v1::Param out;
  switch (p.kind) {
    case KernelParam::Kind::kBuffer:
      out.set_kind(v1::Param::KIND_BUFFER);
      *out.mutable_buffer() = ToProto(p.buffer);
      break;
    case KernelParam::Kind::kScalar:
      out.set_kind(v1::Param::KIND_SCALAR);
      *out.mutable_value() = ToProto(p.value);
      out.set_scalar_dtype(static_cast<v1::DType>(p.scalar_dtype));
      break;
    case KernelParam::Kind::kTensorMap: {
      out.set_kind(v1::Param::KIND_TENSOR_MAP);
      v1::TensorMapSpec* tm = out.mutable_tensor_map();
      *tm->mutable_buffer() = ToProto(p.tensor_map.buffer);
      tm->set_dtype(static_cast<v1::DType>(p.tensor_map.dtype));
      for (const SizeExpr& d : p.tensor_map.global_dims) *tm->add_global_dims() = ToProto(d);
      for (const SizeExpr& s : p.tensor_map.global_strides) *tm->add_global_strides() = ToProto(s);
      for (uint32_t b : p.tensor_map.box_dims) tm->add_box_dims(b);
      switch (p.tensor_map.swizzle_bytes) {
        case 32: tm->set_swizzle(v1::TensorMapSpec::SWIZZLE_32B); break;
        case 64: tm->set_swizzle(v1::TensorMapSpec::SWIZZLE_64B); break;
        case 128: tm->set_swizzle(v1::TensorMapSpec::SWIZZLE_128B); break;
        default: tm->set_swizzle(v1::TensorMapSpec::SWIZZLE_NONE); break;
      }
      break;
    }
    case KernelParam::Kind::kWorkspace:
      out.set_kind(v1::Param::KIND_WORKSPACE);
      *out.mutable_workspace_bytes() = ToProto(p.workspace_bytes);
      out.set_workspace_zeroed(p.workspace_zeroed);
      break;
  }
  return out;
}

v1::Precondition ToProto(const Precondition& p) {
  v1::Precondition out;
  out.set_kind(static_cast<v1::Precondition::Kind>(p.kind));
  if (p.kind == Precondition::Kind::kAligned || p.kind == Precondition::Kind::kContiguous) {
    *out.mutable_buffer() = ToProto(p.buffer);
  } else {
    *out.mutable_expr() = ToProto(p.expr);
  }
  out.set_value(p.value);
  out.set_description(p.description);
  return out;
}

v1::Variant ToProto(const Variant& v) {
  v1::Variant out;
  out.set_family(static_cast<v1::Family>(v.family));
  for (const auto& [k, val] : v.params) (*out.mutable_params())[k] = val;
  return out;
}

absl::StatusOr<Variant> FromProto(const v1::Variant& v) {
  if (!v1::Family_IsValid(v.family()) || v.family() == v1::FAMILY_UNSPECIFIED)
    return absl::InvalidArgumentError("variant.family: unknown family");
  Variant out;
  out.family = static_cast<Family>(v.family());
  for (const auto& [k, val] : v.params()) out.params[k] = val;
  return out;
}

v1::Resources ToProto(const Resources& r) {
  v1::Resources out;
  out.set_registers(r.registers);
  out.set_spill_bytes(r.spill_bytes);
  out.set_static_smem_bytes(r.static_smem_bytes);
  out.set_local_bytes(r.local_bytes);
  return out;
}

v1::RooflineReport ToProto(const RooflineReport& r) {
  v1::RooflineReport out;
  out.mutable_flops()->set_fma(r.work.flops.fma);
  out.mutable_flops()->set_special(r.work.flops.special);
  out.mutable_flops()->set_tensor(r.work.flops.tensor);
  out.mutable_flops()->set_integer(r.work.flops.integer);
  out.set_bytes(r.work.bytes);
  out.set_intensity(r.intensity);
  out.set_bound(static_cast<v1::Bound>(r.bound));
  out.set_predicted_seconds(r.predicted_seconds);
  out.set_measured_seconds(r.measured_seconds);
  out.set_fraction_of_roofline(r.fraction_of_roofline);
  for (const auto& [k, v] : r.sizes) (*out.mutable_sizes())[k] = v;
  out.set_ceilings_source(r.ceilings_source);
  return out;
}

v1::Trial ToProto(const Trial& t) {
  v1::Trial out;
  *out.mutable_variant() = ToProto(t.variant);
  out.set_outcome(static_cast<v1::Trial::Outcome>(t.outcome));
  out.set_median_seconds(t.median_seconds);
  for (double s : t.samples_seconds) out.add_samples_seconds(s);
  out.set_message(t.message);
  out.set_compile_seconds(t.compile_seconds);
  *out.mutable_resources() = ToProto(t.resources);
  return out;
}

v1::DeviceFingerprint ToProto(const DeviceFingerprint& d) {
  v1::DeviceFingerprint out;
  out.set_name(d.name);
  out.set_cc_major(d.cc_major);
  out.set_cc_minor(d.cc_minor);
  out.set_sm_count(d.sm_count);
  out.set_sm_clock_khz(d.sm_clock_khz);
  out.set_mem_clock_khz(d.mem_clock_khz);
  out.set_mem_bus_width_bits(d.mem_bus_width_bits);
  out.set_l2_bytes(d.l2_bytes);
  out.set_memory_bytes(d.memory_bytes);
  out.set_power_limit_mw(d.power_limit_mw);
  out.set_ecc(d.ecc);
  out.set_mig(d.mig);
  out.set_digest(d.Digest());
  return out;
}

v1::Ceilings ToProto(const Ceilings& c) {
  v1::Ceilings out;
  out.set_read_bytes_per_second(c.read_bw);
  out.set_write_bytes_per_second(c.write_bw);
  out.set_copy_bytes_per_second(c.copy_bw);
  out.set_fma_flops(c.fma_flops);
  out.set_special_flops(c.special_flops);
  out.set_tensor_flops(c.tensor_flops);
  out.set_measured(c.measured);
  return out;
}

Ceilings FromProto(const v1::Ceilings& c) {
  Ceilings out;
  out.read_bw = c.read_bytes_per_second();
  out.write_bw = c.write_bytes_per_second();
  out.copy_bw = c.copy_bytes_per_second();
  out.fma_flops = c.fma_flops();
  out.special_flops = c.special_flops();
  out.tensor_flops = c.tensor_flops();
  out.measured = c.measured();
  return out;
}

v1::Kernel ToProto(const CompiledKernel& k, bool include_source) {
  v1::Kernel out;
  const KernelSpec& s = k.spec;
  out.set_entry(s.entry);
  out.set_arch(k.arch);
  out.set_cubin(k.cubin);
  out.set_ptx(k.ptx);
  for (const KernelParam& p : s.params) *out.add_params() = ToProto(p);
  *out.mutable_grid() = ToProto(s.grid);
  *out.mutable_block() = ToProto(s.block);
  out.set_dynamic_smem_bytes(s.dynamic_smem_bytes);
  if (s.cluster_x > 0) {
    Dim3Expr c{SizeExpr::Const(s.cluster_x), SizeExpr::Const(std::max(1u, s.cluster_y)),
               SizeExpr::Const(std::max(1u, s.cluster_z))};
    *out.mutable_cluster() = ToProto(c);
  }
  for (const Precondition& p : s.preconditions) *out.add_preconditions() = ToProto(p);
  *out.mutable_variant() = ToProto(s.variant);
  *out.mutable_resources() = ToProto(k.resources);
  for (uint32_t op : s.ops) out.add_ops(op);
  out.set_partition_reason(s.partition_reason);
  if (include_source) out.set_source(s.source);
  return out;
}

}  // namespace kfuse
