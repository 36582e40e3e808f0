// Splits a canonical chain into the kernels that compute it, each tagged with
// the family whose generator emits it and the reason its boundary is drawn.
//
//   KFUSE_ASSIGN_OR_RETURN(Partition p, PartitionChain(canonical));
//   for (const KernelGroup& k : p.kernels) EmitFamily(canonical, k, variant);
#ifndef KFUSE_CODEGEN_PARTITION_H_
#define KFUSE_CODEGEN_PARTITION_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/ir.h"
#include "core/launch.h"
#include "core/variant.h"

namespace kfuse {

// One kernel of a plan.
struct KernelGroup {
  Family family = Family::kInvalid;
  // Node ids the kernel computes, ascending. Chain inputs and constants it
  // reads are not listed; its operands are chain inputs, constants, or nodes
  // of earlier kernels (listed in Partition::intermediates). A node may be
  // listed by several kernels: each computes it (element-wise work is
  // recomputed rather than stored and read back). A matmul kernel's operand
  // that is a permute or expand of a chain input is listed by no kernel: the
  // matmul reads the input through it, as strides.
  std::vector<int32_t> nodes;
  // Nodes whose values leave this kernel: chain outputs and intermediates
  // that later kernels read, ascending.
  std::vector<int32_t> results;
  std::string reason;  // Why the boundary is here, for the plan and logs.
  // The results later kernels read, ascending (each one is also in
  // Partition::intermediates). Empty when the kernel is the plan's last.
  std::vector<int32_t> intermediates;
};

struct Partition {
  std::vector<KernelGroup> kernels;  // In launch order.
  // Node ids materialised in HBM between kernels, ascending (empty with one
  // kernel). A plan lists them in this order (KernelPlan.intermediates).
  std::vector<int32_t> intermediates;
};

// For a canonical chain:
//  - an attention (MatchAttention in codegen/attention.h: the whole chain is
//    softmax(f(Q K^T)) V with its masks, epilogue and log-sum-exp): one
//    attention kernel; one the attention kernel does not take (Unimplemented:
//    a head dim past 256, say) is partitioned as the rules below say when
//    every kernel of that generates, else it is that Unimplemented;
//  - inputs, constants and element-wise ops (casts, where, comparisons
//    included): one pointwise kernel, which iterates over the broadcast of
//    its outputs' shapes; where those shapes do not all nest ([R, 1] and
//    [1, C], whose broadcast is R x C; or shapes that do not broadcast at
//    all), and the chain has no layout view, a pointwise kernel for each
//    group of outputs whose shapes nest, each computing what its outputs
//    need (work they share is computed by each), no intermediates;
//  - reductions all along the innermost axis of one row shape, with
//    element-wise work around them: one row kernel (see AnalyzeRows for what
//    answers Unimplemented);
//  - some reduction over outer axes (axes without the innermost one), or a
//    reduction along rows that reads per-row results of reductions over
//    rows of another shape (a loss's mean over the batch): a staged plan.
//    Walking the reductions in chain order: the per-row results such a
//    reduction reads are stored first, by a row kernel per row shape (which
//    also writes the chain outputs it can compute over the same rows, and
//    stores every other result of those rows a later reduction needs, so
//    they are read once); each reduction over outer axes is a reduction
//    kernel of its own, computing its operand inline from chain inputs,
//    constants and what earlier kernels stored. Then one kernel for the
//    outputs left, reading the stored results: a row kernel where
//    reductions along rows remain (standardized columns, then a softmax
//    along rows), else a pointwise kernel for each group of outputs whose
//    shapes nest (x - mean(x, axis=0) is two kernels; softmax over axis 0
//    is three). Results of reductions over
//    outer axes that later kernels read are intermediates, as are the
//    stored per-row results. Unimplemented, naming the op: one over the
//    innermost and outer axes together (Canonicalize splits those, so only
//    a chain that skipped it), min/max of bool values, or a kernel
//    the row family cannot generate (AnalyzeRows: per-row values of two row
//    shapes in one element-wise output, say); and, naming an output, a
//    chain input or constant as an output beside such reductions;
//  - layout views (slice, permute, reshape, expand, concat) join the
//    pointwise kernel as index arithmetic; iota, views beside a reduction
//    and a reshape that is not a view answer Unimplemented, naming the op;
//  - matrix products (matmul), each its own matmul kernel anchored at it.
//    Its epilogue: walking nodes in id order, an element-wise node that
//    reads some product kernel's node joins the kernel of the latest such
//    product (largest anchor) when its shape is that product's exactly and
//    none of its operands is element-wise work outside every matmul kernel.
//    Its other operands are chain inputs, constants, element-wise work on
//    those only (listed in the kernel too and recomputed per output
//    element), or nodes of earlier product kernels (their intermediates).
//    Any other element-wise node (it broadcasts to a larger shape, or reads
//    such a node) is left to pointwise kernels. Each operand of a product is
//    a chain input; a permute of one swapping just its last two dims or an
//    expand of one keeping them (read as strides, listed nowhere); a node of
//    an earlier product kernel (an intermediate); or computed work, stored
//    first by a kernel anchored at the operand, which computes the
//    operand's closure (element-wise work and reductions along rows) from
//    chain inputs, constants and product kernels' nodes (intermediates): a
//    row kernel when the closure reduces (LayerNorm before a linear layer),
//    else pointwise; the epilogue reads such an operand of its own product
//    too. A reduction along the rows of a product kernel's floating-point
//    value (kept, the product's shape otherwise) joins that kernel when N
//    is static and at most kMaxEpilogueRow (a CTA's tile holds whole rows),
//    as does element-wise work on its per-row values alone ([.., M, 1]; a
//    norm's rsqrt(var + eps)): softmax or LayerNorm of a narrow product is
//    one kernel. Wider rows span several CTAs' tiles: such reductions (and
//    those of integer or bool rows) and what reads them join those
//    closures. A kernel storing an operand also writes the outputs it can
//    compute from its rows (a row kernel) or of the operand's shape (a
//    pointwise one) from what kernels anchored before it store, but for
//    other products' operands, which their own kernels write. The outputs
//    no kernel writes then get a trailing kernel anchored at the largest of
//    them, reading product kernels' nodes and stored operands: a row kernel
//    when they reduce (softmax of a product), with the element-wise outputs
//    it can write; the element-wise outputs left, a pointwise kernel for each
//    group whose shapes nest. Each output is one kernel's result. Row
//    kernels are generated from their group as a chain of its own
//    (codegen/subchain.h). Kernels launch in anchor order (see
//    MatmulPartition for why that is a valid order). A product kernel's
//    results are its product and epilogue nodes that are outputs or read
//    elsewhere, not the element-wise work on leaves it recomputes.
//    Unimplemented, naming the op: a reduction over outer axes, a row
//    closure the row family cannot generate (AnalyzeRows), or a layout view
//    other than those operands (or one that other ops read too); naming
//    `outputs[j]`: a chain input or constant as an output.
absl::StatusOr<Partition> PartitionChain(const Chain& canonical);

// The buffers of p.intermediates in order, as a plan lists them: each in its
// node's dtype and shape, dense.
std::vector<IntermediateBuffer> IntermediateBuffers(const Chain& canonical, const Partition& p);

// The version of what turns a partition's kernels into a plan besides
// the generators: a kernel group's own chain and its renumbering
// (codegen/subchain.cc, PointwiseView in generators.cc), the intermediates'
// numbering and preconditions (NumberIntermediates, RenameBuffer) and the
// plan's assembly (service/pipeline.cc). Bump it when one of those changes
// what a plan of several kernels holds for the same partition.
inline constexpr int kPlanAssemblyVersion = 1;

// What the generators read of `p` besides the chain, hashed with
// kPlanAssemblyVersion: each kernel's family, nodes, results and
// intermediates, and each intermediate's buffer (node, dtype, shape); not
// the reasons, which only explain. 16 hex digits. A plan of several kernels
// keys by it (`plan/<digest>` in the generator part), so a change to the
// partitioner re-keys exactly the plans whose kernels it changes.
std::string PartitionDigest(const Chain& canonical, const Partition& p);

// Generators name an intermediate by its node id (BufferRef{kIntermediate,
// node}); a plan names it by its position in Partition::intermediates.
// Renumbers every intermediate buffer `spec` names, from the first numbering
// to the second. Internal error for a node that is not an intermediate.
absl::Status NumberIntermediates(const Partition& p, KernelSpec* spec);

// The element type of intermediate `id`'s buffer: its dtype, but f32 for
// the f16/bf16 results of reductions over outer axes. A fused kernel keeps
// such a value in f32 registers; stored in 16 bits, a column sum rounded
// the column softmax's quotient twice (1.8x eager's error, run126). They are
// rows of reduced values, so the wider buffer costs next to nothing.
DType IntermediateDType(const Chain& c, int32_t id);

// Renames a precondition's buffer to `to` (from a generator's numbering to
// its plan's), and its description where it opens by naming the buffer as
// generators do ("input 1 is 16-byte aligned ..." -> "intermediate 0 is ...").
void RenameBuffer(const BufferRef& to, Precondition* c);

// The widest product row (N) a matmul kernel reduces in its epilogue: its
// CTA tile is at most 256 columns wide.
inline constexpr int64_t kMaxEpilogueRow = 256;

// `product_shape` [.., M, N] with N made 1: one value per row, kept.
std::vector<Dim> PerRowShape(std::vector<Dim> product_shape);

// Why reduction `id` cannot run in the epilogue of the matmul kernel whose
// product is node `mm`, "" when it can: it must reduce the last dim of a
// floating-point value of the product's shape and keep it, and the rows
// must be static, 2 to kMaxEpilogueRow wide. The partitioner and the
// matmul generator both ask this, so they agree on what joins an epilogue.
std::string WhyNotInEpilogue(const Chain& c, int32_t mm, int32_t id);

// Internal to the partitioner (partition.cc, partition_matmul.cc).
namespace partition_internal {

// The element-wise nodes computing `roots` from chain inputs, constants,
// reductions and the nodes of `stored` (which other kernels compute), `roots`
// included when they are element-wise and not stored.
std::set<int32_t> ElementwiseClosure(const Chain& c, std::vector<int32_t> roots,
                                     const std::set<int32_t>& stored = {});

// OK when the row generator takes group `k` (a row kernel), seen as a chain
// of its own (Isolate, AnalyzeRows).
absl::Status CheckRowKernel(const Chain& c, const KernelGroup& k);

// Unimplemented, naming the output, when the outputs at positions `which` of
// c.outputs do not broadcast to one shape (one pointwise kernel iterates over
// it).
absl::Status OutputsShareOneIterationSpace(const Chain& c, const std::vector<size_t>& which);

// A pointwise kernel's outputs (indices into c.outputs, ascending) and the
// space it iterates over (their broadcast, leading unit dims dropped).
struct OutputGroup {
  std::vector<Dim> space;
  std::vector<size_t> outputs;
};

// The outputs at positions `which` of c.outputs grouped by the pointwise
// kernels that write them: outputs whose shapes nest share one.
std::vector<OutputGroup> OutputKernels(const Chain& c, std::vector<size_t> which);

// Said by each of such kernels' reasons.
inline constexpr char kOutputsApart[] =
    "outputs of shapes that do not nest in its own get kernels of their own, as one kernel iterates over "
    "the broadcast of the shapes it writes";

// Attention composites inside a chain of other products (the clients'
// `attention` between projections): per product whose first operand is a
// softmax of another product's scores, the nodes from that product (QK^T)
// to it, with the element-wise work and iotas the scores read and the
// permutes, expands and reshapes of its operands (read as strides of what
// they view), where the group, isolated (what it reads from other kernels
// its inputs: Q, K, V as stored, masks), is an attention
// MatchAttention takes whole and the fused kernel generates, and no other
// op reads its nodes but its output. Family kAttention; results: its
// output.
std::vector<KernelGroup> FindAttentions(const Chain& canonical);

// PartitionChain for a chain with some matmul and no iota but in its
// attentions (FindAttentions), each of which is one kernel.
absl::StatusOr<Partition> MatmulPartition(const Chain& canonical);

}  // namespace partition_internal
}  // namespace kfuse

#endif  // KFUSE_CODEGEN_PARTITION_H_
