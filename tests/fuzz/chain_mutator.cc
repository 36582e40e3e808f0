#include "tests/fuzz/chain_mutator.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "google/protobuf/stubs/logging.h"

// Weak: the NVRTC sample program links this file without libFuzzer.
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace kfuse::fuzz {
namespace {

using Rng = std::mt19937_64;

// Mutations stay small: beyond this many ops or inputs, growth stops.
constexpr int kMaxOps = 48;
constexpr int kMaxInputs = 12;

int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool Chance(Rng& rng, int one_in) { return Uniform(rng, 0, one_in - 1) == 0; }
template <typename T>
T Pick(Rng& rng, std::initializer_list<T> v) {
  return *(v.begin() + Uniform(rng, 0, static_cast<int64_t>(v.size()) - 1));
}

std::string Marked(Rng& rng, const char* what) {
  std::string s = std::string(kClientMarker) + what;
  for (int i = Uniform(rng, 1, 6); i > 0; --i) s += static_cast<char>('a' + Uniform(rng, 0, 25));
  return s;
}

// Symbol names: mostly a small shared pool (so dims share symbols), some odd.
std::string SymbolName(Rng& rng) {
  switch (Uniform(rng, 0, 9)) {
    case 0: return std::string(kClientMarker) + "*/\n#include \"x\"\\";
    case 1: return std::string(kClientMarker) + std::string(Uniform(rng, 1, 300), 'N');
    case 2: return std::string(kClientMarker) + " sym0 n e0 ";
    case 3: return Marked(rng, "s");
    default: return std::string(kClientMarker) + Pick(rng, {"N", "M", "B", "T"});
  }
}

v1::DType RandomDType(Rng& rng) {
  if (Chance(rng, 12)) return static_cast<v1::DType>(Pick<int>(rng, {0, 6, 7, 8, 99, -1}));
  return static_cast<v1::DType>(Uniform(rng, 1, 5));  // f32 f16 bf16 i32 bool.
}

int64_t RandomSize(Rng& rng) {
  if (Chance(rng, 10)) {
    return Pick<int64_t>(rng, {0, -1, -7, int64_t{1} << 31, int64_t{1} << 40, int64_t{1} << 62,
                               std::numeric_limits<int64_t>::max(),
                               std::numeric_limits<int64_t>::min()});
  }
  return Pick<int64_t>(rng, {1, 1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 128, 1000, 4096, 65537});
}

void RandomDim(Rng& rng, v1::Dim* d) {
  d->Clear();
  if (Chance(rng, 3)) {
    d->set_symbol(Chance(rng, 40) ? std::string() : SymbolName(rng));
    if (Chance(rng, 2)) d->set_hint(Chance(rng, 4) ? RandomSize(rng) : Uniform(rng, 1, 1 << 20));
    if (Chance(rng, 3)) d->set_max(Chance(rng, 3) ? RandomSize(rng) : Uniform(rng, 1, 1 << 24));
  } else if (!Chance(rng, 30)) {  // Else: neither size nor symbol.
    d->set_size(RandomSize(rng));
  }
}

void RandomShape(Rng& rng, google::protobuf::RepeatedPtrField<v1::Dim>* shape) {
  shape->Clear();
  int rank = Chance(rng, 20) ? static_cast<int>(Uniform(rng, 4, 10)) : static_cast<int>(Uniform(rng, 0, 3));
  for (int i = 0; i < rank; ++i) RandomDim(rng, shape->Add());
}

double RandomValue(Rng& rng) {
  switch (Uniform(rng, 0, 3)) {
    case 0:
      return Pick<double>(rng, {std::nan(""), -std::nan(""), INFINITY, -INFINITY, 1e308, -1e308,
                                5e-324, -5e-324, 1e-40, -0.0, 65504, 65520, 3.4e38, 3.5e38,
                                2147483648.0, -2147483649.0, 16777217.0, 0.1});
    case 1: return static_cast<double>(Uniform(rng, -4, 8));
    case 2: return std::uniform_real_distribution<double>(-4, 4)(rng);
    default: return Pick<double>(rng, {0.5, 1, 2, 0, -1, 0.25, 3});
  }
}

// The kinds valid ops use, weighted to the element-wise ones the pointwise
// generator covers.
v1::OpKind RandomKind(Rng& rng) {
  switch (Uniform(rng, 0, 9)) {
    case 0: return static_cast<v1::OpKind>(Uniform(rng, 70, 90));  // Reductions, layout, matmul, holes.
    case 1: return static_cast<v1::OpKind>(Pick<int>(rng, {0, 2, 3, 9, 33, 39, 55, 59, 62, 91, 1000, -5}));
    case 2: return static_cast<v1::OpKind>(Pick<int>(rng, {1, 60, 61}));  // constant, where, cast.
    case 3: case 4: case 5: return static_cast<v1::OpKind>(Uniform(rng, 10, 32));
    default: return static_cast<v1::OpKind>(Uniform(rng, 40, 54));
  }
}

int ArityOf(v1::OpKind k) {
  int v = static_cast<int>(k);
  if (v == 1 || v == 85) return 0;
  if (v >= 40 && v <= 54) return 2;
  if (v == 60) return 3;
  if (v == 84) return 2;
  if (v == 90) return 2;
  return 1;
}

// A reference to a value before op `pos` (mostly), or an odd one.
void RandomRef(Rng& rng, const v1::Chain& c, int pos, v1::Ref* r) {
  r->Clear();
  int n_in = c.inputs_size();
  switch (Uniform(rng, 0, 19)) {
    case 0: return;  // Neither input nor op.
    case 1: r->set_input(Pick<uint32_t>(rng, {static_cast<uint32_t>(n_in), 0xffffffffu, 1000})); return;
    case 2: r->set_op(static_cast<uint32_t>(pos)); return;  // Itself.
    case 3: r->set_op(Pick<uint32_t>(rng, {static_cast<uint32_t>(pos + 1), 0xffffffffu, 0x80000000u})); return;
    default: break;
  }
  if (pos > 0 && (n_in == 0 || Chance(rng, 2))) {
    // Recent ops more often, so chains grow deep.
    int64_t back = Chance(rng, 2) ? 1 : Uniform(rng, 1, pos);
    r->set_op(static_cast<uint32_t>(pos - back));
  } else if (n_in > 0) {
    r->set_input(static_cast<uint32_t>(Uniform(rng, 0, n_in - 1)));
  } else {
    r->set_input(0);
  }
}

bool IsPointwiseKind(v1::OpKind k) {
  int v = static_cast<int>(k);
  return v == 1 || (v >= 10 && v <= 61);
}

// Which of FillAttrs' attributes `kind` reads (one of them for iota), or -1.
int OwnAttrs(Rng& rng, v1::OpKind kind) {
  switch (kind) {
    case v1::OP_REDUCE_SUM:
    case v1::OP_REDUCE_MAX:
    case v1::OP_REDUCE_MIN:
    case v1::OP_REDUCE_MEAN: return 0;
    case v1::OP_PERMUTE: return 1;
    case v1::OP_SLICE: return 2;
    case v1::OP_RESHAPE:
    case v1::OP_EXPAND: return 3;
    case v1::OP_CONCAT: return 4;
    case v1::OP_IOTA: return Pick<int>(rng, {3, 4, 5});
    case v1::OP_CONSTANT:
    case v1::OP_CAST: return 5;
    default: return -1;
  }
}

// Mostly an attribute the op's kind reads; now and then any (which the
// server refuses, naming it).
void FillAttrs(Rng& rng, v1::Op* op) {
  const int own = OwnAttrs(rng, op->kind());
  switch (own >= 0 && !Chance(rng, 8) ? own : Uniform(rng, 0, 5)) {
    case 0:
      op->mutable_reduce()->clear_axes();
      for (int i = Uniform(rng, 0, 3); i > 0; --i) {
        op->mutable_reduce()->add_axes(Chance(rng, 8) ? Pick<int32_t>(rng, {9, -9, 1 << 30, INT32_MIN}) : Uniform(rng, -3, 3));
      }
      op->mutable_reduce()->set_keepdim(Chance(rng, 2));
      break;
    case 1:
      op->mutable_permute()->clear_perm();
      for (int i = Uniform(rng, 0, 4); i > 0; --i) op->mutable_permute()->add_perm(Uniform(rng, -2, 4));
      break;
    case 2: {
      v1::SliceAttrs* s = op->mutable_slice();
      s->set_axis(Uniform(rng, -3, 3));
      s->set_start(Chance(rng, 6) ? std::numeric_limits<int64_t>::min() : Uniform(rng, -10, 10));
      s->set_stop(Chance(rng, 6) ? std::numeric_limits<int64_t>::max() : Uniform(rng, -10, 100));
      s->set_step(Chance(rng, 6) ? Pick<int64_t>(rng, {-1, 0, std::numeric_limits<int64_t>::max()}) : Uniform(rng, 0, 3));
      break;
    }
    case 3: RandomShape(rng, op->mutable_shape()->mutable_shape()); break;
    case 4: op->mutable_axis()->set_axis(Chance(rng, 6) ? INT32_MIN : Uniform(rng, -3, 3)); break;
    default: op->set_dtype(RandomDType(rng)); break;
  }
}

void AddInput(Rng& rng, v1::Chain* c) {
  v1::TensorSpec* in = c->add_inputs();
  in->set_name(Marked(rng, "in"));
  in->set_dtype(RandomDType(rng));
  if (c->inputs_size() > 1 && Chance(rng, 2)) {
    *in->mutable_shape() = c->inputs(Uniform(rng, 0, c->inputs_size() - 2)).shape();  // Same shape.
  } else {
    RandomShape(rng, in->mutable_shape());
  }
}

void AddOp(Rng& rng, v1::Chain* c, int pos) {
  v1::Op op;
  op.set_kind(RandomKind(rng));
  int arity = ArityOf(op.kind());
  if (Chance(rng, 15)) arity = Uniform(rng, 0, 4);
  for (int i = 0; i < arity; ++i) RandomRef(rng, *c, pos, op.add_args());
  if (op.kind() == v1::OP_CONSTANT) {
    op.set_value(RandomValue(rng));
    if (Chance(rng, 2)) op.set_dtype(RandomDType(rng));
  } else if (op.kind() == v1::OP_CAST) {
    op.set_dtype(RandomDType(rng));
  } else if (!IsPointwiseKind(op.kind()) || Chance(rng, 10)) {
    FillAttrs(rng, &op);
  }
  c->mutable_ops()->Add(std::move(op));
  for (int i = c->ops_size() - 1; i > pos; --i) c->mutable_ops()->SwapElements(i, i - 1);
  if (Chance(rng, 2)) {
    v1::Output* o = c->add_outputs();
    o->set_name(Marked(rng, "out"));
    o->mutable_value()->set_op(static_cast<uint32_t>(pos));
  }
}

// A fresh small, mostly valid chain: a few inputs, a few ops, an output.
void FreshChain(Rng& rng, v1::Chain* c) {
  c->Clear();
  for (int i = Uniform(rng, 1, 3); i > 0; --i) AddInput(rng, c);
  for (int i = Uniform(rng, 1, 4); i > 0; --i) AddOp(rng, c, c->ops_size());
  if (c->outputs_size() == 0) {
    v1::Output* o = c->add_outputs();
    o->set_name(Marked(rng, "out"));
    o->mutable_value()->set_op(static_cast<uint32_t>(c->ops_size() - 1));
  }
}

}  // namespace

void MutateChain(v1::Chain* c, Rng& rng) {
  int n_ops = c->ops_size();
  int n_in = c->inputs_size();
  int choice = static_cast<int>(Uniform(rng, 0, 18));
  if (n_ops == 0 && n_in == 0) choice = 17;
  switch (choice) {
    case 0:
    case 1:  // Add an op (mostly valid).
      if (n_ops < kMaxOps) {
        AddOp(rng, c, Chance(rng, 4) ? static_cast<int>(Uniform(rng, 0, n_ops)) : n_ops);
        return;
      }
      [[fallthrough]];
    case 2:  // Remove an op.
      if (n_ops > 0) {
        c->mutable_ops()->DeleteSubrange(static_cast<int>(Uniform(rng, 0, n_ops - 1)), 1);
      }
      return;
    case 3:  // Duplicate an op.
      if (n_ops > 0 && n_ops < kMaxOps) {
        int i = static_cast<int>(Uniform(rng, 0, n_ops - 1));
        *c->add_ops() = c->ops(i);
      }
      return;
    case 4:  // Swap two ops.
      if (n_ops > 1) {
        c->mutable_ops()->SwapElements(static_cast<int>(Uniform(rng, 0, n_ops - 1)),
                                       static_cast<int>(Uniform(rng, 0, n_ops - 1)));
      }
      return;
    case 5:  // Change an op kind.
      if (n_ops > 0) c->mutable_ops(static_cast<int>(Uniform(rng, 0, n_ops - 1)))->set_kind(RandomKind(rng));
      return;
    case 6: {  // Change, add or remove an arg.
      if (n_ops == 0) return;
      int i = static_cast<int>(Uniform(rng, 0, n_ops - 1));
      v1::Op* op = c->mutable_ops(i);
      if (op->args_size() == 0 || Chance(rng, 6)) {
        RandomRef(rng, *c, i, op->add_args());
      } else if (Chance(rng, 6)) {
        op->mutable_args()->RemoveLast();
      } else {
        RandomRef(rng, *c, i, op->mutable_args(static_cast<int>(Uniform(rng, 0, op->args_size() - 1))));
      }
      return;
    }
    case 7:  // Change a dtype.
      if (n_in > 0 && (n_ops == 0 || Chance(rng, 2))) {
        c->mutable_inputs(static_cast<int>(Uniform(rng, 0, n_in - 1)))->set_dtype(RandomDType(rng));
      } else if (n_ops > 0) {  // Mostly one that reads its dtype (a stray one is refused).
        v1::Op* op = c->mutable_ops(static_cast<int>(Uniform(rng, 0, n_ops - 1)));
        if (OwnAttrs(rng, op->kind()) == 5 || op->kind() == v1::OP_IOTA || Chance(rng, 8)) {
          op->set_dtype(RandomDType(rng));
        }
      }
      return;
    case 8: {  // Change a shape: one dim, add or drop a dim, or a new shape.
      if (n_in == 0) return;
      v1::TensorSpec* in = c->mutable_inputs(static_cast<int>(Uniform(rng, 0, n_in - 1)));
      int r = in->shape_size();
      if (r > 0 && Chance(rng, 2)) {
        RandomDim(rng, in->mutable_shape(static_cast<int>(Uniform(rng, 0, r - 1))));
      } else if (r > 0 && Chance(rng, 3)) {
        in->mutable_shape()->RemoveLast();
      } else if (Chance(rng, 2)) {
        RandomDim(rng, in->add_shape());
      } else {
        RandomShape(rng, in->mutable_shape());
      }
      return;
    }
    case 9: {  // Strides.
      if (n_in == 0) return;
      v1::TensorSpec* in = c->mutable_inputs(static_cast<int>(Uniform(rng, 0, n_in - 1)));
      in->clear_strides();
      if (Chance(rng, 4)) return;
      int r = Chance(rng, 5) ? static_cast<int>(Uniform(rng, 0, 4)) : in->shape_size();
      for (int i = 0; i < r; ++i) {
        in->add_strides(Chance(rng, 6) ? Pick<int64_t>(rng, {-1, 0, int64_t{1} << 40, std::numeric_limits<int64_t>::max()})
                                       : Pick<int64_t>(rng, {0, 1, 2, 4, 8, 64, 4096}));
      }
      return;
    }
    case 10:  // Attributes.
      if (n_ops > 0) FillAttrs(rng, c->mutable_ops(static_cast<int>(Uniform(rng, 0, n_ops - 1))));
      return;
    case 11:  // A constant's value.
      for (int tries = 0; tries < 4 && n_ops > 0; ++tries) {
        v1::Op* op = c->mutable_ops(static_cast<int>(Uniform(rng, 0, n_ops - 1)));
        if (op->kind() == v1::OP_CONSTANT || tries == 3) {
          op->set_value(RandomValue(rng));
          return;
        }
      }
      return;
    case 12: {  // Add an output.
      if (c->outputs_size() >= 8) return;
      v1::Output* o = c->add_outputs();
      o->set_name(Marked(rng, "out"));
      RandomRef(rng, *c, n_ops, o->mutable_value());
      return;
    }
    case 13:  // Remove an output.
      if (c->outputs_size() > 0) {
        c->mutable_outputs()->DeleteSubrange(static_cast<int>(Uniform(rng, 0, c->outputs_size() - 1)), 1);
      }
      return;
    case 14:  // Add an input.
      if (n_in < kMaxInputs) AddInput(rng, c);
      return;
    case 15:  // Remove an input.
      if (n_in > 0) c->mutable_inputs()->DeleteSubrange(static_cast<int>(Uniform(rng, 0, n_in - 1)), 1);
      return;
    case 16: {  // Rename one symbol everywhere.
      std::string from, to = SymbolName(rng);
      for (v1::TensorSpec& in : *c->mutable_inputs()) {
        for (v1::Dim& d : *in.mutable_shape()) {
          if (d.kind_case() != v1::Dim::kSymbol) continue;
          if (from.empty()) from = d.symbol();
          if (d.symbol() == from) d.set_symbol(to);
        }
      }
      return;
    }
    default:
      FreshChain(rng, c);
      return;
  }
}

size_t MutateSerializedChain(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  Rng rng(seed);
  const bool bytes_too = LLVMFuzzerMutate != nullptr;
  if (bytes_too && Chance(rng, 8)) return LLVMFuzzerMutate(data, size, max_size);
  v1::Chain chain;
  if (!chain.ParseFromArray(data, static_cast<int>(size))) chain.Clear();
  for (int i = Chance(rng, 4) ? static_cast<int>(Uniform(rng, 2, 4)) : 1; i > 0; --i) MutateChain(&chain, rng);
  std::string bytes;
  if (!chain.SerializeToString(&bytes) || bytes.size() > max_size) {
    return bytes_too ? LLVMFuzzerMutate(data, size, max_size) : size;
  }
  std::memcpy(data, bytes.data(), bytes.size());
  return bytes.size();
}

void SilenceProtobufLogs() { google::protobuf::SetLogHandler(nullptr); }

std::vector<std::string> MarkedClientStrings(const v1::Chain& chain) {
  std::vector<std::string> out;
  auto add = [&](const std::string& s) {
    if (s.find(kClientMarker) != std::string::npos) out.push_back(s);
  };
  for (const v1::TensorSpec& in : chain.inputs()) {
    add(in.name());
    for (const v1::Dim& d : in.shape()) add(d.symbol());
  }
  for (const v1::Op& op : chain.ops()) {
    for (const v1::Dim& d : op.shape().shape()) add(d.symbol());
  }
  for (const v1::Output& o : chain.outputs()) add(o.name());
  return out;
}

}  // namespace kfuse::fuzz
