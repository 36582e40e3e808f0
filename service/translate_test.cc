#include "service/translate.h"

#include <functional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::HasSubstr;

v1::TensorSpec* AddInput(v1::Chain& c, v1::DType t, std::initializer_list<int64_t> dims,
                         const char* name = "x") {
  v1::TensorSpec* in = c.add_inputs();
  in->set_name(name);
  in->set_dtype(t);
  for (int64_t d : dims) in->add_shape()->set_size(d);
  return in;
}

v1::Ref In(uint32_t i) {
  v1::Ref r;
  r.set_input(i);
  return r;
}
v1::Ref Op(uint32_t j) {
  v1::Ref r;
  r.set_op(j);
  return r;
}

v1::Op* AddOp(v1::Chain& c, v1::OpKind kind, std::initializer_list<v1::Ref> args) {
  v1::Op* op = c.add_ops();
  op->set_kind(kind);
  for (const v1::Ref& r : args) *op->add_args() = r;
  return op;
}

void AddOutput(v1::Chain& c, v1::Ref r, const char* name = "y") {
  v1::Output* o = c.add_outputs();
  o->set_name(name);
  *o->mutable_value() = r;
}

// x: f32[4,8]; y = relu(x) * 2.
v1::Chain Good() {
  v1::Chain c;
  AddInput(c, v1::DTYPE_F32, {4, 8});
  AddOp(c, v1::OP_RELU, {In(0)});
  AddOp(c, v1::OP_CONSTANT, {})->set_value(2);
  AddOp(c, v1::OP_MUL, {Op(0), Op(1)});
  AddOutput(c, Op(2));
  return c;
}

TEST(TranslateTest, GoodChain) {
  auto t = TranslateChain(Good());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->nodes.size(), 4u);
  EXPECT_EQ(t->nodes[0].kind, OpKind::kInput);
  EXPECT_EQ(t->nodes[3].kind, OpKind::kMul);
  EXPECT_EQ(t->nodes[3].args, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(t->nodes[3].wire_index, 2);
  EXPECT_EQ(t->nodes[3].type.dtype, DType::kF32);
  EXPECT_EQ(t->outputs, (std::vector<int32_t>{3}));
  EXPECT_EQ(t->input_names, (std::vector<std::string>{"x"}));
  EXPECT_EQ(t->output_names, (std::vector<std::string>{"y"}));
}

TEST(TranslateTest, SymbolsAreInternedWithHintAndMax) {
  v1::Chain c;
  v1::TensorSpec* a = AddInput(c, v1::DTYPE_BF16, {});
  v1::Dim* d = a->add_shape();
  d->set_symbol("N");
  d->set_hint(1000);
  a->add_shape()->set_size(64);
  v1::TensorSpec* b = AddInput(c, v1::DTYPE_BF16, {}, "b");
  b->add_shape()->set_symbol("N");
  b->mutable_shape(0)->set_max(4096);
  b->add_shape()->set_size(64);
  AddOp(c, v1::OP_ADD, {In(0), In(1)});
  v1::Op* r = AddOp(c, v1::OP_RESHAPE, {Op(0)});
  r->mutable_shape()->add_shape()->set_symbol("N");
  r->mutable_shape()->add_shape()->set_size(8);
  r->mutable_shape()->add_shape()->set_size(8);
  v1::Op* s = AddOp(c, v1::OP_SLICE, {Op(1)});
  s->mutable_slice()->set_axis(-1);
  s->mutable_slice()->set_stop(4);
  AddOutput(c, Op(2));
  auto t = TranslateChain(c);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->symbols.size(), 1u);
  EXPECT_EQ(t->symbols[0].name, "N");
  EXPECT_EQ(t->symbols[0].hint, 1000);
  EXPECT_EQ(t->symbols[0].max, 4096);
  EXPECT_EQ(t->nodes[1].type.shape[0], Dim::Sym(0));
  EXPECT_EQ(t->nodes[3].type.shape.size(), 3u);
  EXPECT_EQ(t->nodes[4].step, 1);  // 0 on the wire means 1.
  EXPECT_EQ(t->nodes[4].axis, 2);
  EXPECT_EQ(t->nodes[4].type.shape[2], Dim::Static(4));
}

TEST(TranslateTest, RejectsBadRequests) {
  using Edit = std::function<void(v1::Chain&)>;
  struct Case {
    const char* name;
    Edit edit;
    absl::StatusCode code;
    const char* message;
  } cases[] = {
      {"unknown op", [](v1::Chain& c) { c.mutable_ops(0)->set_kind(static_cast<v1::OpKind>(999)); },
       absl::StatusCode::kInvalidArgument, "ops[0].kind: unknown op kind 999"},
      {"unset op", [](v1::Chain& c) { c.mutable_ops(2)->set_kind(v1::OP_UNSPECIFIED); },
       absl::StatusCode::kInvalidArgument, "ops[2].kind: op kind must be set"},
      {"gap in op kinds",
       [](v1::Chain& c) { c.mutable_ops(0)->set_kind(static_cast<v1::OpKind>(33)); },
       absl::StatusCode::kInvalidArgument, "ops[0].kind: unknown op kind 33"},
      {"wrong arity", [](v1::Chain& c) { *c.mutable_ops(0)->add_args() = In(0); },
       absl::StatusCode::kInvalidArgument, "op 0 (relu): args: takes 1 operand, got 2"},
      {"forward ref", [](v1::Chain& c) { *c.mutable_ops(0)->mutable_args(0) = Op(2); },
       absl::StatusCode::kInvalidArgument, "ops[0].args[0]: op 2 is not an earlier op"},
      {"self ref", [](v1::Chain& c) { *c.mutable_ops(2)->mutable_args(1) = Op(2); },
       absl::StatusCode::kInvalidArgument, "ops[2].args[1]: op 2 is not an earlier op"},
      {"dangling input", [](v1::Chain& c) { *c.mutable_ops(0)->mutable_args(0) = In(5); },
       absl::StatusCode::kInvalidArgument, "ops[0].args[0]: input 5 does not exist"},
      {"unset ref", [](v1::Chain& c) { c.mutable_ops(0)->mutable_args(0)->Clear(); },
       absl::StatusCode::kInvalidArgument, "ops[0].args[0]: reference must name an input or an op"},
      {"dangling output", [](v1::Chain& c) { *c.mutable_outputs(0)->mutable_value() = Op(9); },
       absl::StatusCode::kInvalidArgument, "outputs[0].value: op 9 is not an earlier op"},
      {"unset output", [](v1::Chain& c) { c.mutable_outputs(0)->clear_value(); },
       absl::StatusCode::kInvalidArgument, "outputs[0].value: an output must name a value"},
      {"where with f32 cond",
       [](v1::Chain& c) {
         AddOp(c, v1::OP_WHERE, {In(0), In(0), In(0)});
       },
       absl::StatusCode::kInvalidArgument,
       "op 3 (where): args[0]: condition must be bool, got f32"},
      {"shapes do not broadcast",
       [](v1::Chain& c) {
         AddInput(c, v1::DTYPE_F32, {5}, "b");
         AddOp(c, v1::OP_ADD, {In(0), In(1)});
       },
       absl::StatusCode::kInvalidArgument,
       "op 3 (add): args[1]: shapes [4,8] and [5] do not broadcast"},
      {"empty chain", [](v1::Chain& c) { c.Clear(); }, absl::StatusCode::kInvalidArgument,
       "ops, outputs: the chain is empty"},
      {"no outputs", [](v1::Chain& c) { c.clear_outputs(); }, absl::StatusCode::kInvalidArgument,
       "outputs: the chain has none"},
      {"513 ops",
       [](v1::Chain& c) {
         for (int i = 0; i < 510; ++i) AddOp(c, v1::OP_NEG, {In(0)});
       },
       absl::StatusCode::kInvalidArgument, "ops: the chain has 513 ops; the limit is 512"},
      {"65 inputs",
       [](v1::Chain& c) {
         for (int i = 0; i < 64; ++i) AddInput(c, v1::DTYPE_F32, {1});
       },
       absl::StatusCode::kInvalidArgument, "inputs: the chain has 65 inputs; the limit is 64"},
      {"rank 9",
       [](v1::Chain& c) {
         AddInput(c, v1::DTYPE_F32, {1, 1, 1, 1, 1, 1, 1, 1, 1});
       },
       absl::StatusCode::kInvalidArgument, "inputs[1].shape: rank 9 exceeds the limit of 8"},
      {"2^41 elements",
       [](v1::Chain& c) {
         AddInput(c, v1::DTYPE_F32, {int64_t{1} << 21, int64_t{1} << 20}, "big");
       },
       absl::StatusCode::kInvalidArgument, "inputs[1] (\"big\"): shape: more than"},
      {"non-positive size",
       [](v1::Chain& c) { c.mutable_inputs(0)->mutable_shape(1)->set_size(0); },
       absl::StatusCode::kInvalidArgument, "inputs[0] (\"x\"): shape[1]: size must be positive"},
      {"empty symbol", [](v1::Chain& c) { c.mutable_inputs(0)->mutable_shape(1)->set_symbol(""); },
       absl::StatusCode::kInvalidArgument, "inputs[0].shape[1]: symbol must not be empty"},
      {"dim without size or symbol",
       [](v1::Chain& c) { c.mutable_inputs(0)->mutable_shape(1)->clear_kind(); },
       absl::StatusCode::kInvalidArgument, "inputs[0].shape[1]: a dim needs a size or a symbol"},
      {"conflicting hints",
       [](v1::Chain& c) {
         c.mutable_inputs(0)->mutable_shape(0)->set_symbol("N");
         c.mutable_inputs(0)->mutable_shape(0)->set_hint(4);
         c.mutable_inputs(0)->mutable_shape(1)->set_symbol("N");
         c.mutable_inputs(0)->mutable_shape(1)->set_hint(8);
       },
       absl::StatusCode::kInvalidArgument, "inputs[0].shape[1]: symbol hint 8 conflicts with 4"},
      {"hint on a static dim",
       [](v1::Chain& c) { c.mutable_inputs(0)->mutable_shape(1)->set_hint(-7); },
       absl::StatusCode::kInvalidArgument, "inputs[0].shape[1]: hint and max belong to symbolic dims"},
      {"hint past the element limit",
       [](v1::Chain& c) {
         c.mutable_inputs(0)->mutable_shape(0)->set_symbol("N");
         c.mutable_inputs(0)->mutable_shape(0)->set_hint(int64_t{1} << 62);
       },
       absl::StatusCode::kInvalidArgument,
       "inputs[0].shape[0]: hint 4611686018427387904 exceeds the limit of 1099511627776 elements"},
      {"a repeated output name",
       [](v1::Chain& c) { AddOutput(c, Op(0), "y"); },
       absl::StatusCode::kInvalidArgument, "outputs[1].name: name \"y\" repeats outputs[0].name"},
      {"a repeated input name",
       [](v1::Chain& c) { AddInput(c, v1::DTYPE_F32, {4, 8}); },
       absl::StatusCode::kInvalidArgument, "inputs[1].name: name \"x\" repeats inputs[0].name"},
      // Names come back in every plan and error: a 20 MB symbol name made an
      // answer too large to send.
      {"an input name past 1024 bytes",
       [](v1::Chain& c) { c.mutable_inputs(0)->set_name(std::string(1025, 'n')); },
       absl::StatusCode::kInvalidArgument, "inputs[0].name: a name of 1025 bytes; at most 1024"},
      {"an output name past 1024 bytes",
       [](v1::Chain& c) { c.mutable_outputs(0)->set_name(std::string(5000, 'y')); },
       absl::StatusCode::kInvalidArgument, "outputs[0].name: a name of 5000 bytes; at most 1024"},
      {"a symbol name past 1024 bytes",
       [](v1::Chain& c) { c.mutable_inputs(0)->mutable_shape(0)->set_symbol(std::string(20 << 20, 'S')); },
       absl::StatusCode::kInvalidArgument, "inputs[0].shape[0]: a name of 20971520 bytes; at most 1024"},
      {"bad constant",
       [](v1::Chain& c) {
         c.mutable_ops(1)->set_dtype(v1::DTYPE_I32);
         c.mutable_ops(1)->set_value(0.5);
       },
       absl::StatusCode::kInvalidArgument,
       "op 1 (constant): value: 0.5 is not exactly representable in i32"},
      {"unknown dtype",
       [](v1::Chain& c) { c.mutable_inputs(0)->set_dtype(static_cast<v1::DType>(77)); },
       absl::StatusCode::kInvalidArgument, "inputs[0].dtype: unknown dtype 77"},
      {"unset dtype", [](v1::Chain& c) { c.mutable_inputs(0)->set_dtype(v1::DTYPE_UNSPECIFIED); },
       absl::StatusCode::kInvalidArgument, "inputs[0].dtype: dtype must be set"},
      {"unknown cast dtype",
       [](v1::Chain& c) { AddOp(c, v1::OP_CAST, {In(0)})->set_dtype(static_cast<v1::DType>(12)); },
       absl::StatusCode::kInvalidArgument, "ops[3].dtype: unknown dtype 12"},
      {"an i64 mean",
       [](v1::Chain& c) {
         c.mutable_inputs(0)->set_dtype(v1::DTYPE_I64);
         AddOp(c, v1::OP_REDUCE_MEAN, {In(0)});
       },
       absl::StatusCode::kInvalidArgument, "op 3 (reduce_mean): args[0]: reduce_mean needs a float operand, got i64"},
  };
  for (const Case& k : cases) {
    v1::Chain c = Good();
    k.edit(c);
    auto t = TranslateChain(c);
    ASSERT_FALSE(t.ok()) << k.name;
    EXPECT_EQ(t.status().code(), k.code) << k.name << ": " << t.status();
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(k.message)) << k.name;
  }
}

TEST(TranslateTest, HugeRequestIsRefusedBeforeBuilding) {
  v1::Chain c = Good();
  for (int i = 0; i < 100000; ++i) AddOp(c, v1::OP_NEG, {Op(i)});
  auto t = TranslateChain(c);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("100003 ops"));
}

// Python's 2 and 2.0 are one double on the wire; weak_float tells them
// apart, as torch does: i32 * 2 is i32, i32 * 2.0 is f32.
TEST(TranslateTest, AWeakFloatPromotesAsAFloatEvenWhenWhole) {
  auto product = [](bool weak_float, v1::DType constant_dtype) {
    v1::Chain c;
    AddInput(c, v1::DTYPE_I32, {4});
    v1::Op* k = AddOp(c, v1::OP_CONSTANT, {});
    k->set_value(2);
    k->set_weak_float(weak_float);
    k->set_dtype(constant_dtype);
    AddOp(c, v1::OP_MUL, {In(0), Op(0)});
    AddOutput(c, Op(1));
    absl::StatusOr<Chain> t = TranslateChain(c);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? t->nodes[2].type.dtype : DType::kInvalid;
  };
  EXPECT_EQ(product(false, v1::DTYPE_UNSPECIFIED), DType::kI32);
  EXPECT_EQ(product(true, v1::DTYPE_UNSPECIFIED), DType::kF32);
  EXPECT_EQ(product(true, v1::DTYPE_I32), DType::kI32);  // A typed constant's dtype wins.
}

// An attribute the op does not read is refused, naming it: a reduction's
// axes put in `axis` would otherwise reduce every axis.
TEST(TranslateTest, StrayAttributesAreRefused) {
  using Edit = std::function<void(v1::Chain&)>;
  struct Case {
    Edit edit;
    const char* message;
  } cases[] = {
      {[](v1::Chain& c) { c.mutable_ops(0)->mutable_reduce()->add_axes(3); }, "ops[0].reduce: relu takes no reduce"},
      {[](v1::Chain& c) { c.mutable_ops(2)->set_value(42); }, "ops[2].value: mul takes no value"},
      {[](v1::Chain& c) { c.mutable_ops(0)->set_value(-0.0); }, "ops[0].value: relu takes no value"},
      {[](v1::Chain& c) { c.mutable_ops(0)->set_dtype(v1::DTYPE_F16); }, "ops[0].dtype: relu takes no dtype"},
      {[](v1::Chain& c) { c.mutable_ops(2)->set_weak_float(true); }, "ops[2].weak_float: mul takes no weak_float"},
      {[](v1::Chain& c) { c.mutable_ops(0)->mutable_shape(); }, "ops[0].shape: relu takes no shape"},
      {[](v1::Chain& c) { c.mutable_ops(0)->mutable_permute(); }, "ops[0].permute: relu takes no permute"},
      {[](v1::Chain& c) { c.mutable_ops(1)->mutable_slice()->set_axis(1); }, "ops[1].slice: constant takes no slice"},
      {[](v1::Chain& c) {  // A sum whose axes went to `axis`.
         v1::Op* sum = AddOp(c, v1::OP_REDUCE_SUM, {Op(2)});
         sum->mutable_axis()->set_axis(1);
       },
       "ops[3].axis: reduce_sum takes no axis"},
  };
  for (const Case& k : cases) {
    v1::Chain c = Good();
    k.edit(c);
    auto t = TranslateChain(c);
    ASSERT_FALSE(t.ok()) << k.message;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(k.message));
  }
  // The attributes each kind reads pass.
  v1::Chain c = Good();
  c.mutable_ops(1)->set_weak_float(true);
  v1::Op* sum = AddOp(c, v1::OP_REDUCE_SUM, {Op(2)});
  sum->mutable_reduce()->add_axes(1);
  sum->mutable_reduce()->set_keepdim(true);
  AddOp(c, v1::OP_CAST, {Op(3)})->set_dtype(v1::DTYPE_BF16);
  AddOutput(c, Op(4), "s");
  auto t = TranslateChain(c);
  EXPECT_TRUE(t.ok()) << t.status();
}

}  // namespace
}  // namespace kfuse
