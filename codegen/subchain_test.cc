#include "codegen/subchain.h"

#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "codegen/generators.h"
#include "codegen/partition.h"
#include "codegen/reduce_test_chains.h"
#include "codegen/row_test_chains.h"
#include "codegen/validate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kfuse {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// softmax(x @ w) with the product an output too, its rows (512) wider than
// a matmul's tile: the row kernel of the plan reads the product from
// memory.
Chain SoftmaxOfProduct() {
  Chain c;
  const int32_t x = c.AddInput(TensorType{DType::kBF16, {Dim::Static(64), Dim::Static(128)}});
  const int32_t w = c.AddInput(TensorType{DType::kBF16, {Dim::Static(128), Dim::Static(512)}});
  const int32_t m = c.AddOp(OpKind::kMatmul, {x, w});
  const int32_t mx = reduce_test::Reduce(&c, OpKind::kReduceMax, m, {1}, true);
  const int32_t e = c.AddOp(OpKind::kExp, {c.AddOp(OpKind::kSub, {m, mx})});
  c.outputs = {m, c.AddOp(OpKind::kDiv, {e, reduce_test::Reduce(&c, OpKind::kReduceSum, e, {1}, true)})};
  return reduce_test::Finish(std::move(c));
}

TEST(SubChainTest, ARowGroupReadsTheProductAsAnInputAndIsRenumberedBack) {
  const Chain c = SoftmaxOfProduct();
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 2u);
  const KernelGroup& row = p->kernels[1];
  ASSERT_EQ(row.family, Family::kRowReduction);
  EXPECT_FALSE(CoversChain(c, row));
  EXPECT_FALSE(CoversChain(c, KernelGroup{}));

  absl::StatusOr<SubChain> s = Isolate(c, row);
  ASSERT_TRUE(s.ok()) << s.status();
  const int32_t product = p->intermediates[0];
  // x, w, then the product; the softmax is the one output.
  EXPECT_EQ(s->chain.num_inputs(), 3);
  EXPECT_EQ(s->inputs[2], (BufferRef{BufferRef::Kind::kIntermediate, static_cast<uint32_t>(product)}));
  // The chain's inputs have no names: the product's name lands on its own
  // input, not on x's.
  ASSERT_EQ(s->chain.input_names.size(), 3u);
  EXPECT_EQ(s->chain.input_names[0], "");
  EXPECT_EQ(s->chain.input_names[2], "op 0 (matmul)");
  ASSERT_EQ(s->outputs.size(), 1u);
  EXPECT_EQ(s->outputs[0], (BufferRef{BufferRef::Kind::kOutput, 1}));
  EXPECT_TRUE(CoversChain(s->chain, s->group));

  // The row kernel, as the plan sees it: x and w, the product read from
  // memory, output 1.
  absl::StatusOr<KernelSpec> k = EmitFamily(c, row, FamilyHeuristic(c, row));
  ASSERT_TRUE(k.ok()) << k.status();
  std::vector<BufferRef> buffers;
  for (const KernelParam& a : k->params) {
    if (a.kind == KernelParam::Kind::kBuffer) buffers.push_back(a.buffer);
  }
  EXPECT_THAT(buffers, ElementsAre(BufferRef{BufferRef::Kind::kInput, 0},
                                   BufferRef{BufferRef::Kind::kInput, 1},
                                   BufferRef{BufferRef::Kind::kIntermediate,
                                             static_cast<uint32_t>(product)},
                                   BufferRef{BufferRef::Kind::kOutput, 1}));
  EXPECT_EQ(k->ops, std::vector<uint32_t>(row.nodes.begin(), row.nodes.end()));

  KernelSpec bad;
  bad.params.push_back(KernelParam::Buffer(BufferRef{BufferRef::Kind::kOutput, 5}));
  EXPECT_EQ(s->Restore(&bad).code(), absl::StatusCode::kInternal);
}

// A chain at the input limit whose plan's row kernel reads the column
// mean beside every input: the kernel's own chain has one input more than a
// client may send, and is planned all the same.
// A row kernel reading a slice of an input in place: its chain has an
// input of its own at the slice's strides and offset, on the sliced
// input's buffer, and no slice.
TEST(SubChainTest, ASliceOfAnInputIsAnInputAtItsStridesOnTheSameBuffer) {
  const Chain c = row_test::SlicedRmsNorm(DType::kBF16, -4096, 3072, 1024, 1024);
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  const KernelGroup& row = p->kernels[0];
  EXPECT_FALSE(CoversChain(c, row));
  absl::StatusOr<SubChain> s = Isolate(c, row);
  ASSERT_TRUE(s.ok()) << s.status();
  // x, the weight, then x[:, 1024:2048].
  ASSERT_EQ(s->chain.num_inputs(), 3);
  const Node& view = s->chain.nodes[2];
  EXPECT_EQ(view.kind, OpKind::kInput);
  EXPECT_THAT(view.strides, ElementsAre(3072, 1));
  EXPECT_EQ(view.offset, 1024);
  EXPECT_EQ(s->inputs[2], (BufferRef{BufferRef::Kind::kInput, 0}));
  EXPECT_EQ(s->chain.input_names[2], "op 0 (slice)");
  for (const Node& n : s->chain.nodes) EXPECT_NE(n.kind, OpKind::kSlice);
  EXPECT_TRUE(CoversChain(s->chain, s->group));
  // The kernel reads x's buffer from element 1024 of each 3072-wide row.
  absl::StatusOr<KernelSpec> k = EmitFamily(c, row, FamilyHeuristic(c, row));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->source, HasSubstr("kf_c0 * 3072LL + 1024LL"));
  std::vector<BufferRef> buffers;
  for (const KernelParam& a : k->params) {
    if (a.kind == KernelParam::Kind::kBuffer) buffers.push_back(a.buffer);
  }
  EXPECT_THAT(buffers, Contains(BufferRef{BufferRef::Kind::kInput, 0}));
  EXPECT_THAT(buffers, Not(Contains(BufferRef{BufferRef::Kind::kInput, 2})));
}

// A slice's step scales the view's stride, except where the slice leaves
// one element: a step near 2^63 (which validation takes) would overflow it
// (a fuzzer finding).
TEST(SubChainTest, AViewOfASliceLeavingOneElementDoesNotStepOverIt) {
  Chain c;
  const int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(1000), Dim::Static(16)}});
  const int32_t every_third = c.AddOp(OpKind::kSlice, {x});
  c.nodes[every_third].axis = 0;
  c.nodes[every_third].stop = 76;
  c.nodes[every_third].step = 3;
  const int32_t first = c.AddOp(OpKind::kSlice, {x});
  c.nodes[first].axis = 0;
  c.nodes[first].start = 2;
  c.nodes[first].stop = 76;
  c.nodes[first].step = std::numeric_limits<int64_t>::max();
  c.outputs = {every_third, first};
  absl::StatusOr<Chain> v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  std::optional<InputView> view = AsInputView(*v, every_third);
  ASSERT_TRUE(view.has_value());
  EXPECT_THAT(view->strides, ElementsAre(48, 1));
  view = AsInputView(*v, first);
  ASSERT_TRUE(view.has_value());
  EXPECT_THAT(view->strides, ElementsAre(0, 1));
  EXPECT_EQ(view->offset, 32);
}

// A group norm's rows: x [2, 8, 5, 6] as [2, 4, 60] is a view of x, read
// in place by the row kernel (no pointwise copy first); a reshape that
// merges dims no stride can (x transposed, then merged) is not.
TEST(SubChainTest, AReshapeOfAnInputIsAnInputViewWhereStridesCanSayIt) {
  Chain c;
  const int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(2), Dim::Static(8), Dim::Static(5), Dim::Static(6)}});
  const int32_t t = c.AddInput(TensorType{DType::kF32, {Dim::Static(6), Dim::Static(5)}}, {1, 6});
  const int32_t rows = c.AddOp(OpKind::kReshape, {x});
  c.nodes[rows].shape = {Dim::Static(2), Dim::Static(4), Dim::Static(60)};
  const int32_t flat = c.AddOp(OpKind::kReshape, {t});
  c.nodes[flat].shape = {Dim::Static(30)};
  const int32_t split = c.AddOp(OpKind::kReshape, {x});
  c.nodes[split].shape = {Dim::Static(2), Dim::Static(2), Dim::Static(4), Dim::Static(1), Dim::Static(30)};
  const int32_t unit = c.AddOp(OpKind::kReshape, {x});
  c.nodes[unit].shape = {Dim::Static(2), Dim::Static(8), Dim::Static(30), Dim::Static(1)};
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceMean, rows, {2}, true), c.AddOp(OpKind::kExp, {flat}),
               c.AddOp(OpKind::kExp, {split}), c.AddOp(OpKind::kExp, {unit})};
  absl::StatusOr<Chain> v = Validate(c);
  ASSERT_TRUE(v.ok()) << v.status();
  std::optional<InputView> view = AsInputView(*v, rows);
  ASSERT_TRUE(view.has_value());
  EXPECT_THAT(view->strides, ElementsAre(240, 60, 1));
  EXPECT_TRUE(ReadInPlace(*v, rows));
  EXPECT_FALSE(AsInputView(*v, flat).has_value());
  view = AsInputView(*v, split);
  ASSERT_TRUE(view.has_value());
  EXPECT_THAT(view->strides, ElementsAre(240, 120, 30, 0, 1));
  // A trailing unit dim is the row kernels' own reshape of per-row values.
  EXPECT_FALSE(AsInputView(*v, unit).has_value());
}

// A per-row value's trailing unit dim over a slice of an input (lengths
// [:R] as [R, 1], masking the rows): the row kernel takes the reshape
// itself and reads the slice in place, as before reshapes were InputViews.
TEST(SubChainTest, ATrailingUnitReshapeOfASliceReadsTheSliceInPlace) {
  Chain c;
  const int32_t x = c.AddInput(TensorType{DType::kF32, {Dim::Static(4), Dim::Static(256)}});
  const int32_t len = c.AddInput(TensorType{DType::kF32, {Dim::Static(6)}});
  const int32_t first = c.AddOp(OpKind::kSlice, {len});
  c.nodes[first].axis = 0;
  c.nodes[first].stop = 4;
  const int32_t per_row = c.AddOp(OpKind::kReshape, {first});
  c.nodes[per_row].shape = {Dim::Static(4), Dim::Static(1)};
  const int32_t scaled = c.AddOp(OpKind::kMul, {x, per_row});
  c.outputs = {reduce_test::Reduce(&c, OpKind::kReduceSum, scaled, {1}, true)};
  const Chain v = reduce_test::Finish(std::move(c));
  EXPECT_FALSE(AsInputView(v, per_row).has_value());
  absl::StatusOr<Partition> p = PartitionChain(v);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 1u);
  absl::StatusOr<SubChain> s = Isolate(v, p->kernels[0]);
  ASSERT_TRUE(s.ok()) << s.status();
  int slices = 0, reshapes = 0;
  for (const Node& n : s->chain.nodes) {
    slices += n.kind == OpKind::kSlice;
    reshapes += n.kind == OpKind::kReshape;
  }
  EXPECT_EQ(slices, 0);  // Read in place: an input at its offset.
  EXPECT_EQ(reshapes, 1);
  absl::StatusOr<KernelSpec> k = EmitFamily(v, p->kernels[0], FamilyHeuristic(v, p->kernels[0]));
  ASSERT_TRUE(k.ok()) << k.status();
}

TEST(SubChainTest, AKernelOfAChainAtTheInputLimitMayReadMoreBuffers) {
  const Chain c = reduce_test::ManyInputsThenRowSoftmax(DType::kF32, Limits{}.max_inputs, 256, 64);
  absl::StatusOr<Partition> p = PartitionChain(c);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->kernels.size(), 2u);
  ASSERT_EQ(p->kernels[1].family, Family::kRowReduction);
  absl::StatusOr<SubChain> row = Isolate(c, p->kernels[1]);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->chain.num_inputs(), Limits{}.max_inputs + 1);
  for (const KernelGroup& k : p->kernels) {
    absl::StatusOr<KernelSpec> spec = EmitFamily(c, k, FamilyHeuristic(c, k));
    EXPECT_TRUE(spec.ok()) << spec.status();
  }
}

}  // namespace
}  // namespace kfuse
