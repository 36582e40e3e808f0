#include "clients/launch_config.h"

#include <limits>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/launch.h"
#include "core/status.h"

namespace kfuse {
namespace {

constexpr int kMaxExprDepth = 64;

absl::StatusOr<int64_t> EvalAt(const v1::Expr& e, absl::Span<const int64_t> symbols, int depth) {
  if (depth > kMaxExprDepth)
    return absl::InvalidArgumentError("plan expression nests deeper than 64");
  switch (e.kind_case()) {
    case v1::Expr::kConstant:
      return e.constant();
    case v1::Expr::kSymbol:
      if (e.symbol() >= symbols.size())
        return absl::InvalidArgumentError(
            absl::StrCat("plan expression uses symbol ", e.symbol(), " of ", symbols.size()));
      return symbols[e.symbol()];
    case v1::Expr::kBinary:
      break;
    default:
      return absl::InvalidArgumentError("plan expression is empty");
  }
  KFUSE_ASSIGN_OR_RETURN(int64_t x, EvalAt(e.binary().lhs(), symbols, depth + 1));
  KFUSE_ASSIGN_OR_RETURN(int64_t y, EvalAt(e.binary().rhs(), symbols, depth + 1));
  int64_t r = 0;
  bool overflow = false;
  switch (e.binary().op()) {
    case v1::Expr::OP_ADD:
      overflow = __builtin_add_overflow(x, y, &r);
      break;
    case v1::Expr::OP_SUB:
      overflow = __builtin_sub_overflow(x, y, &r);
      break;
    case v1::Expr::OP_MUL:
      overflow = __builtin_mul_overflow(x, y, &r);
      break;
    case v1::Expr::OP_CEIL_DIV:
      if (y <= 0)
        return absl::InvalidArgumentError(absl::StrCat("plan expression: ceil_div by ", y));
      r = x / y + (x % y != 0 && x > 0 ? 1 : 0);
      break;
    case v1::Expr::OP_MIN:
      r = x < y ? x : y;
      break;
    case v1::Expr::OP_MAX:
      r = x > y ? x : y;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("plan expression has unknown op ", e.binary().op()));
  }
  if (overflow) return absl::InvalidArgumentError("plan expression overflows int64");
  return r;
}

// Grid, block and cluster fields may be left unset: they mean `fallback`.
absl::StatusOr<int64_t> EvalOr(const v1::Expr& e, absl::Span<const int64_t> symbols,
                               int64_t fallback) {
  if (e.kind_case() == v1::Expr::KIND_NOT_SET) return fallback;
  return EvalExpr(e, symbols);
}

absl::StatusOr<DType> ToDType(int wire, absl::string_view what) {
  if (wire < static_cast<int>(DType::kF32) || wire > static_cast<int>(DType::kF64))
    return absl::InvalidArgumentError(absl::StrCat(what, " has no valid dtype (", wire, ")"));
  return static_cast<DType>(wire);
}

std::string Shape(absl::Span<const int64_t> s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

std::string TensorName(absl::string_view kind, int i, const v1::TensorSpec& spec) {
  return absl::StrCat(kind, " ", i, " ('", spec.name(), "')");
}

// Strides of `b`, dense when it gave none.
std::vector<int64_t> Effective(const DeviceBuffer& b) {
  return b.strides.empty() ? DenseStrides(b.shape) : b.strides;
}

// Layouts agree when every dim with more than one element has the same stride.
bool SameLayout(absl::Span<const int64_t> shape, absl::Span<const int64_t> a,
                absl::Span<const int64_t> b) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1 && a[d] != b[d]) return false;
  return true;
}

class Resolver {
 public:
  Resolver(const v1::KernelPlan& plan, absl::Span<const DeviceBuffer> inputs,
           absl::Span<const DeviceBuffer> outputs)
      : plan_(plan), inputs_(inputs), outputs_(outputs) {}

  absl::StatusOr<LaunchConfig> Run() {
    if (outputs_.size() != static_cast<size_t>(plan_.outputs_size()))
      return absl::InvalidArgumentError(
          absl::StrCat("plan has ", plan_.outputs_size(), " outputs; got ", outputs_.size()));
    KFUSE_ASSIGN_OR_RETURN(cfg_.symbols, BindSymbols(plan_, inputs_));
    for (int i = 0; i < plan_.symbols_size(); ++i) by_name_[plan_.symbols(i).name()] = i;
    for (int i = 0; i < plan_.inputs_size(); ++i)
      KFUSE_RETURN_IF_ERROR(
          CheckTensor(TensorName("input", i, plan_.inputs(i)), plan_.inputs(i), inputs_[i]));
    for (int i = 0; i < plan_.outputs_size(); ++i)
      KFUSE_RETURN_IF_ERROR(
          CheckTensor(TensorName("output", i, plan_.outputs(i)), plan_.outputs(i), outputs_[i]));
    for (int i = 0; i < plan_.intermediates_size(); ++i) {
      KFUSE_ASSIGN_OR_RETURN(int64_t bytes, IntermediateBytes(plan_.intermediates(i)));
      cfg_.intermediate_bytes.push_back(bytes);
    }
    for (int k = 0; k < plan_.kernels_size(); ++k) {
      KFUSE_RETURN_IF_ERROR(CheckPreconditions(k));
      KFUSE_ASSIGN_OR_RETURN(KernelLaunch launch, ResolveKernel(k));
      cfg_.kernels.push_back(std::move(launch));
    }
    return std::move(cfg_);
  }

 private:
  absl::Status CheckTensor(const std::string& what, const v1::TensorSpec& spec,
                           const DeviceBuffer& buf) {
    KFUSE_ASSIGN_OR_RETURN(DType want, ToDType(spec.dtype(), what));
    if (buf.dtype != want)
      return absl::InvalidArgumentError(absl::StrCat(what, " must be ",
                                                     std::string(DTypeName(want)), "; got ",
                                                     std::string(DTypeName(buf.dtype))));
    if (buf.shape.size() != static_cast<size_t>(spec.shape_size()))
      return absl::InvalidArgumentError(absl::StrCat(what, " must have rank ", spec.shape_size(),
                                                     "; got shape ", Shape(buf.shape)));
    std::vector<int64_t> want_shape;
    for (int d = 0; d < spec.shape_size(); ++d) {
      const v1::Dim& dim = spec.shape(d);
      int64_t n = 0;
      if (dim.kind_case() == v1::Dim::kSize) {
        n = dim.size();
      } else if (dim.kind_case() == v1::Dim::kSymbol) {
        auto it = by_name_.find(dim.symbol());
        if (it == by_name_.end())
          return absl::InvalidArgumentError(absl::StrCat(
              what, " dim ", d, " uses symbol '", dim.symbol(), "' the plan does not define"));
        n = cfg_.symbols[it->second];
      } else {
        return absl::InvalidArgumentError(absl::StrCat(what, " dim ", d, " is empty in the plan"));
      }
      want_shape.push_back(n);
    }
    if (want_shape != buf.shape)
      return absl::InvalidArgumentError(
          absl::StrCat(what, " must have shape ", Shape(want_shape), "; got ", Shape(buf.shape)));
    if (!buf.strides.empty() && buf.strides.size() != buf.shape.size())
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has ", buf.strides.size(), " strides for rank ", buf.shape.size()));
    std::vector<int64_t> declared(spec.strides().begin(), spec.strides().end());
    if (declared.empty()) declared = DenseStrides(buf.shape);
    if (declared.size() != buf.shape.size())
      return absl::InvalidArgumentError(absl::StrCat(what, " has malformed strides in the plan"));
    std::vector<int64_t> actual = Effective(buf);
    if (!SameLayout(buf.shape, actual, declared))
      return absl::InvalidArgumentError(absl::StrCat(what, " must have strides ", Shape(declared),
                                                     " (the kernel bakes them in); got ",
                                                     Shape(actual)));
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> IntermediateBytes(const v1::Intermediate& im) {
    if (im.bytes().kind_case() != v1::Expr::KIND_NOT_SET) {
      KFUSE_ASSIGN_OR_RETURN(int64_t bytes, EvalExpr(im.bytes(), cfg_.symbols));
      if (bytes < 0) return absl::InvalidArgumentError("plan intermediate size is negative");
      return bytes;
    }
    KFUSE_ASSIGN_OR_RETURN(DType t, ToDType(im.dtype(), "plan intermediate"));
    int64_t n = DTypeBytes(t);
    for (const v1::Expr& e : im.shape()) {
      KFUSE_ASSIGN_OR_RETURN(int64_t d, EvalExpr(e, cfg_.symbols));
      if (d < 0 || __builtin_mul_overflow(n, d, &n))
        return absl::InvalidArgumentError("plan intermediate size is negative or overflows");
    }
    return n;
  }

  absl::StatusOr<BufferSlot> Slot(const v1::BufferRef& ref) {
    switch (ref.kind_case()) {
      case v1::BufferRef::kInput:
        if (ref.input() < inputs_.size()) return BufferSlot{BufferKind::kInput, ref.input()};
        break;
      case v1::BufferRef::kOutput:
        if (ref.output() < outputs_.size()) return BufferSlot{BufferKind::kOutput, ref.output()};
        break;
      case v1::BufferRef::kIntermediate:
        if (ref.intermediate() < cfg_.intermediate_bytes.size())
          return BufferSlot{BufferKind::kIntermediate, ref.intermediate()};
        break;
      default:
        break;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("plan refers to a missing buffer (", ref.ShortDebugString(), ")"));
  }

  absl::Status CheckPreconditions(int k) {
    for (const v1::Precondition& p : plan_.kernels(k).preconditions()) {
      std::string detail;
      bool ok = true;
      switch (p.kind()) {
        case v1::Precondition::KIND_ALIGNED:
        case v1::Precondition::KIND_CONTIGUOUS: {
          KFUSE_ASSIGN_OR_RETURN(BufferSlot s, Slot(p.buffer()));
          if (s.kind == BufferKind::kIntermediate) break;  // Ours: dense, 256-aligned.
          const DeviceBuffer& b =
              s.kind == BufferKind::kInput ? inputs_[s.index] : outputs_[s.index];
          if (p.kind() == v1::Precondition::KIND_ALIGNED) {
            if (p.value() <= 0) return absl::InvalidArgumentError("plan alignment is not positive");
            ok = b.ptr % static_cast<uint64_t>(p.value()) == 0;
            detail =
                absl::StrCat("address 0x", absl::Hex(b.ptr), " is not a multiple of ", p.value());
          } else {
            ok = SameLayout(b.shape, Effective(b), DenseStrides(b.shape));
            detail = absl::StrCat("strides ", Shape(Effective(b)), " are not dense for shape ",
                                  Shape(b.shape));
          }
          break;
        }
        case v1::Precondition::KIND_AT_MOST:
        case v1::Precondition::KIND_AT_LEAST:
        case v1::Precondition::KIND_DIVISIBLE: {
          KFUSE_ASSIGN_OR_RETURN(int64_t v, EvalExpr(p.expr(), cfg_.symbols));
          if (p.kind() == v1::Precondition::KIND_AT_MOST) {
            ok = v <= p.value();
            detail = absl::StrCat(v, " > ", p.value());
          } else if (p.kind() == v1::Precondition::KIND_AT_LEAST) {
            ok = v >= p.value();
            detail = absl::StrCat(v, " < ", p.value());
          } else {
            if (p.value() <= 0) return absl::InvalidArgumentError("plan divisor is not positive");
            ok = v % p.value() == 0;
            detail = absl::StrCat(v, " is not a multiple of ", p.value());
          }
          break;
        }
        default:
          return absl::InvalidArgumentError(
              absl::StrCat("kernel ", k, " has a precondition of unknown kind ", p.kind(),
                           " (a newer server?): refusing to launch without checking it"));
      }
      if (!ok)
        return absl::FailedPreconditionError(absl::StrCat(
            "launch refused: kernel ", k, " requires ", p.description(), " (", detail, ")"));
    }
    return absl::OkStatus();
  }

  absl::Status EvalDim3(const v1::Dim3& d, int64_t fallback, absl::string_view what,
                        std::array<uint32_t, 3>& out, std::array<int64_t, 3> limits) {
    const v1::Expr* e[3] = {&d.x(), &d.y(), &d.z()};
    for (int i = 0; i < 3; ++i) {
      KFUSE_ASSIGN_OR_RETURN(int64_t v, EvalOr(*e[i], cfg_.symbols, fallback));
      if (v < 0 || v > limits[i])
        return absl::InvalidArgumentError(
            absl::StrCat(what, " dim ", i, " is ", v, ", outside [0, ", limits[i], "]"));
      out[i] = static_cast<uint32_t>(v);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<KernelLaunch> ResolveKernel(int k) {
    const v1::Kernel& kernel = plan_.kernels(k);
    KernelLaunch l;
    l.kernel = k;
    std::string where = absl::StrCat("kernel ", k);
    KFUSE_RETURN_IF_ERROR(EvalDim3(kernel.grid(), 1, where + " grid", l.grid,
                                   {kMaxGridDims[0], kMaxGridDims[1], kMaxGridDims[2]}));
    KFUSE_RETURN_IF_ERROR(EvalDim3(kernel.block(), 1, where + " block", l.block,
                                   {kMaxBlockDims[0], kMaxBlockDims[1], kMaxBlockDims[2]}));
    if (kernel.has_cluster())
      KFUSE_RETURN_IF_ERROR(
          EvalDim3(kernel.cluster(), 1, where + " cluster", l.cluster, {16, 16, 16}));
    if (static_cast<int64_t>(l.block[0]) * l.block[1] * l.block[2] > kMaxBlockThreads ||
        l.block[0] * l.block[1] * l.block[2] == 0)
      return absl::InvalidArgumentError(absl::StrCat(
          where, " block has ", l.block[0] * l.block[1] * l.block[2], " threads; 1..1024 allowed"));
    l.empty = l.grid[0] == 0 || l.grid[1] == 0 || l.grid[2] == 0;
    l.dynamic_smem_bytes = kernel.dynamic_smem_bytes();
    for (int i = 0; i < kernel.params_size(); ++i) {
      KFUSE_ASSIGN_OR_RETURN(ResolvedParam p, ResolveParam(kernel.params(i)));
      l.params.push_back(std::move(p));
    }
    return l;
  }

  absl::StatusOr<ResolvedParam> ResolveParam(const v1::Param& p) {
    ResolvedParam r;
    r.kind = p.kind();
    switch (p.kind()) {
      case v1::Param::KIND_BUFFER: {
        KFUSE_ASSIGN_OR_RETURN(r.buffer, Slot(p.buffer()));
        return r;
      }
      case v1::Param::KIND_SCALAR: {
        KFUSE_ASSIGN_OR_RETURN(r.scalar, EvalExpr(p.value(), cfg_.symbols));
        if (p.scalar_dtype() == v1::DTYPE_I32) {
          r.scalar_dtype = DType::kI32;
          if (r.scalar < std::numeric_limits<int32_t>::min() ||
              r.scalar > std::numeric_limits<int32_t>::max())
            return absl::InvalidArgumentError(absl::StrCat(
                "scalar parameter ", r.scalar, " does not fit the kernel's 32-bit argument"));
        } else if (p.scalar_dtype() == v1::DTYPE_I64) {
          r.scalar_dtype = DType::kI64;
        } else {
          return absl::InvalidArgumentError("plan scalar parameter is neither i32 nor i64");
        }
        return r;
      }
      case v1::Param::KIND_WORKSPACE: {
        KFUSE_ASSIGN_OR_RETURN(r.workspace_bytes, EvalExpr(p.workspace_bytes(), cfg_.symbols));
        if (r.workspace_bytes < 0)
          return absl::InvalidArgumentError("plan workspace size is negative");
        r.workspace_zeroed = p.workspace_zeroed();
        return r;
      }
      case v1::Param::KIND_TENSOR_MAP: {
        const v1::TensorMapSpec& m = p.tensor_map();
        KFUSE_ASSIGN_OR_RETURN(r.buffer, Slot(m.buffer()));
        KFUSE_ASSIGN_OR_RETURN(r.map_dtype, ToDType(m.dtype(), "plan tensor map"));
        for (const v1::Expr& e : m.global_dims()) {
          KFUSE_ASSIGN_OR_RETURN(int64_t v, EvalExpr(e, cfg_.symbols));
          if (v <= 0) return absl::InvalidArgumentError("plan tensor map has an empty dim");
          r.map_dims.push_back(static_cast<uint64_t>(v));
        }
        for (const v1::Expr& e : m.global_strides()) {
          KFUSE_ASSIGN_OR_RETURN(int64_t v, EvalExpr(e, cfg_.symbols));
          if (v <= 0 || v % 16 != 0)
            return absl::InvalidArgumentError(
                absl::StrCat("tensor map stride ", v, " bytes is not a positive multiple of 16"));
          r.map_strides.push_back(static_cast<uint64_t>(v));
        }
        r.map_box.assign(m.box_dims().begin(), m.box_dims().end());
        if (r.map_dims.empty() || r.map_dims.size() > 5 ||
            r.map_strides.size() + 1 != r.map_dims.size() || r.map_box.size() != r.map_dims.size())
          return absl::InvalidArgumentError("plan tensor map has inconsistent ranks");
        r.map_swizzle = m.swizzle();
        return r;
      }
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("plan parameter of unknown kind ", p.kind(), " (a newer server?)"));
    }
  }

  const v1::KernelPlan& plan_;
  absl::Span<const DeviceBuffer> inputs_, outputs_;
  absl::flat_hash_map<std::string, int> by_name_;
  LaunchConfig cfg_;
};

}  // namespace

absl::StatusOr<int64_t> EvalExpr(const v1::Expr& e, absl::Span<const int64_t> symbols) {
  return EvalAt(e, symbols, 0);
}

std::vector<int64_t> DenseStrides(absl::Span<const int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

absl::StatusOr<std::vector<int64_t>> BindSymbols(const v1::KernelPlan& plan,
                                                 absl::Span<const DeviceBuffer> inputs) {
  if (inputs.size() != static_cast<size_t>(plan.inputs_size()))
    return absl::InvalidArgumentError(
        absl::StrCat("plan has ", plan.inputs_size(), " inputs; got ", inputs.size()));
  // Every size below is counted in int64: a negative size (which would bind
  // a symbol and make an empty grid, launching nothing), or a shape whose
  // bytes int64 cannot count, is refused here. A size of 0 launches nothing.
  for (size_t i = 0; i < inputs.size(); ++i) {
    int64_t bytes = 8;
    auto what = [&] { return absl::StrCat("input ", i, " ('", plan.inputs(static_cast<int>(i)).name(), "')"); };
    for (size_t axis = 0; axis < inputs[i].shape.size(); ++axis) {
      const int64_t n = inputs[i].shape[axis];
      if (n < 0)
        return absl::InvalidArgumentError(
            absl::StrCat(what(), " axis ", axis, " has size ", n, "; sizes must not be negative"));
      if (__builtin_mul_overflow(bytes, n, &bytes))
        return absl::InvalidArgumentError(absl::StrCat(what(), " has more elements than a launch can address"));
    }
  }
  std::vector<int64_t> values;
  for (int i = 0; i < plan.symbols_size(); ++i) {
    const v1::Symbol& sym = plan.symbols(i);
    if (sym.sources().empty())
      return absl::InvalidArgumentError(
          absl::StrCat("plan symbol '", sym.name(), "' has no source among the inputs"));
    int64_t value = -1;
    std::string first;
    for (const v1::SymbolSource& src : sym.sources()) {
      if (src.input() >= inputs.size() || src.axis() >= inputs[src.input()].shape.size())
        return absl::InvalidArgumentError(
            absl::StrCat("plan symbol '", sym.name(), "' reads input ", src.input(), " axis ",
                         src.axis(), ", which the given inputs do not have"));
      int64_t v = inputs[src.input()].shape[src.axis()];
      std::string here = absl::StrCat("input ", src.input(), " ('", plan.inputs(src.input()).name(),
                                      "') axis ", src.axis());
      if (value >= 0 && v != value)
        return absl::InvalidArgumentError(absl::StrCat(
            "symbol '", sym.name(), "' is ", value, " from ", first, " but ", v, " from ", here));
      if (value < 0) {
        value = v;
        first = here;
      }
    }
    values.push_back(value);
  }
  return values;
}

absl::StatusOr<LaunchConfig> ResolveLaunch(const v1::KernelPlan& plan,
                                           absl::Span<const DeviceBuffer> inputs,
                                           absl::Span<const DeviceBuffer> outputs) {
  return Resolver(plan, inputs, outputs).Run();
}

}  // namespace kfuse
