"""A torch.compile backend: the ATen graph aot_autograd gives is cut into
regions kfuse can fuse, each compiled into one plan; the rest runs eagerly.

    import kfuse.backend

    f = torch.compile(model, backend="kfuse")        # registered by the import
    f = torch.compile(model, backend=kfuse.backend.Backend(mode="heuristic"))
    with torch.inference_mode():
        out = f(x)   # first call per shapes: dynamo + aot_autograd, Compile RPC per region
        out = f(x)   # warm: per region the signature checked, the outputs, the launch

Partition (compile_inference, once per graph): a node is a candidate when
kfuse.torch translates it (the `_ATEN` table and its argument rules), its
inputs and its result are tensors and, where shapes are static, it
translates on its own; a split (or chunk, an attention op such as
_scaled_dot_product_flash_attention, _fused_rms_norm, torch's RMSNorm
on a GPU, native_layer_norm, native_group_norm, or
_native_batch_norm_legit_no_training) is
a candidate with its getitems, as one unit, when they are
the only readers of its pieces (and, for a split, no piece is a graph
output). Candidates are
grown into regions along data edges in graph order; a merge that would
make the graph of regions and eager nodes cyclic is skipped, so each
region is connected and can run as one step. A region takes the tensors it reads from outside and returns the
values used outside. A region larger than kfused takes in one chain
(kfuse.LIMITS: 512 ops, 64 inputs, 64 outputs; a plan of at most 128
kernels), a whole model's graph say, is cut in graph order into pieces
that fit, each cut placed where few values cross it. Where shapes are
static each region is translated at compile time (`Region.chain`); a node
it refuses leaves the candidates and the graph is cut again. Views (t, transpose, permute, slice, view,
reshape, unsqueeze, expand, split) that are graph outputs stay eager
(callers may rely on them aliasing their input).

Threshold: a region with fewer than `min_ops` (default 2) compute ops runs
eagerly: views do not count, and one op is one PyTorch kernel already.

Compute-bound products (products="framework", the default): fusion saves
bytes, and a large product has few to save. A matrix product (mm, bmm,
addmm) or an attention op without a mask, with static shapes, leaves the
candidates where its time predicted at PyTorch's rate (cuBLAS, cuDNN's
attention), plus the store and read of its result that fusing its
epilogue would save, is below kfuse's; both from kfused's ceilings
(GetDeviceInfo, asked once) and the rates `_RATES` records. A product
that streams its weights (a few rows) stays fused; so does one that
reads or feeds a softmax within a few nodes (an attention written out,
which kfused fuses whole). `CompiledGraph.declined` names each with why.

Each region is a kfuse.torch.FusedFunction over its sub-graph (with
dynamic=True in a graph of symbolic sizes: one plan per bucket of rows
where its chain does not read the count): plans per
input signature in `region.cache` and the shared kfuse.torch.plans, the same
client, mode, launcher and fallbacks (server UNIMPLEMENTED, unreachable or
busy, an input dtype chains do not have: the region runs eagerly, one
FallbackWarning per backend and reason with fallback="warn"). CPU tensors
and zero-size inputs run eagerly (gpu_only). Warm calls make no
RPC and load no module, so a warmed compiled function can be captured into
a CUDA graph (README: "torch.compile").

Inference only: a graph whose inputs require grad while grad mode is on
raises NotImplementedError when called (no backward is compiled).
"""
import collections
import contextlib
import dataclasses
import heapq
import itertools
import operator
import threading
import time

try:
    import torch
    import torch.fx
except ImportError as e:  # pragma: no cover (the tests skip without torch)
    raise ImportError("kfuse.backend needs PyTorch (pip install torch)") from e

import kfuse.torch as kt
from kfuse.chain import LIMITS

# ATen views: not counted as compute, and left eager when the graph returns them
# (callers may rely on the alias).
_VIEWS = frozenset({"t", "transpose", "permute", "slice", "view", "_unsafe_view", "reshape",
                    "unsqueeze", "expand", "split", "split_with_sizes"})
# ATen ops that copy their operand unchanged (dropout in evaluation is a
# clone): inside a region an alias, so not counted as compute either.
_IDENTITIES = frozenset({"clone", "alias", "detach"})
_graph_numbers = itertools.count()


def _val(node):
    return node.meta.get("val", node.meta.get("example_value"))


def _is_tensor(node):
    """True for tensor values; nodes without recorded values are assumed to be."""
    v = _val(node)
    return v is None or isinstance(v, torch.Tensor)


def _op_name(node):
    packet = getattr(node.target, "overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(node.target, "__name__", str(node.target))


def _static_spec(node):
    """(dtype, shape) of a tensor node with static sizes, else None."""
    v = _val(node)
    if not isinstance(v, torch.Tensor) or not all(type(d) is int for d in v.shape):
        return None
    return v.dtype, tuple(v.shape)


def _no_fake_mode():
    try:
        from torch._subclasses.fake_tensor import unset_fake_temporarily
    except ImportError:  # pragma: no cover
        return contextlib.nullcontext()
    return unset_fake_temporarily()


def _boundary(nodes):
    """(inputs, outputs) of `nodes` (in graph order): the tensors they read
    from outside, and those of theirs used outside."""
    inside = set(nodes)
    inputs, outputs = {}, []  # inputs: an ordered set
    for n in nodes:
        for i in n.all_input_nodes:
            if i not in inside:
                inputs.setdefault(i)
        if any(u not in inside for u in n.users):
            outputs.append(n)
    return list(inputs), outputs


def _subgraph(nodes):
    """(GraphModule, inputs, outputs) for `nodes` (in graph order): it takes
    the tensors they read from outside and returns, as a tuple, their values
    used outside."""
    inputs, outputs = _boundary(nodes)
    g = torch.fx.Graph()
    env = {}
    for i in inputs:
        env[i] = g.placeholder(i.name)
        env[i].meta = dict(i.meta)
    for n in nodes:
        env[n] = g.node_copy(n, lambda a: env[a])
    g.output(tuple(env[o] for o in outputs))
    return torch.fx.GraphModule(torch.nn.Module(), g), inputs, outputs


def _trial(nodes):
    """(chain or None, kt.Unsupported or None) of translating `nodes` with
    their static input shapes; (None, None) when shapes are not static."""
    gm, inputs, _ = _subgraph(nodes)
    specs = [_static_spec(i) for i in inputs]
    if None in specs:
        return None, None
    with _no_fake_mode():
        try:
            chain, _, _ = kt.translate(gm, specs, "region")
        except kt.Unsupported as e:
            return None, e
    return chain, None


def _split_unit(n):
    """A tuple-valued op kfuse.torch translates (split, chunk, ATen's
    attention ops, whose other outputs may be sizes or None,
    _fused_rms_norm) with its getitems, the only way its pieces are read:
    the unit joins regions whole, so no region returns a tuple. A split's
    pieces are views: none may be a graph output. Else None. (Translating
    the unit refuses a getitem that reads an output kfuse.torch does not
    translate, as _fused_rms_norm's rstd.)"""
    v = _val(n)
    if (n.op != "call_function" or kt._handler(n) is None or not isinstance(v, (tuple, list))
            or not any(isinstance(t, torch.Tensor) for t in v) or not n.users):
        return None
    users = list(n.users)
    if not all(u.op == "call_function" and u.target is operator.getitem for u in users):
        return None
    if _op_name(n) in _VIEWS and any(w.op == "output" for u in users for w in u.users):
        return None
    return [n] + users


def _candidates(nodes, why=None):
    """Nodes kfuse.torch translates, each on its own (repeated layers: once);
    a split with its getitems as one unit. `why` ({node name: reason}), when
    given, gets why each other op is not one."""
    out, seen = set(), {}
    why = {} if why is None else why
    index = {n: k for k, n in enumerate(nodes)}
    for n in nodes:
        unit = _split_unit(n)
        if unit is not None and all(_is_tensor(i) for i in n.all_input_nodes):
            unit.sort(key=index.get)
            err = _trial(unit)[1]
            if err is None:
                out.update(unit)
            else:
                why[n.name] = err.message
            continue
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        if kt._handler(n) is None and not kt._factory(n):
            why[n.name] = f"kfuse.torch does not translate {n.target}"
            continue
        if not isinstance(_val(n), torch.Tensor) or not all(_is_tensor(i) for i in n.all_input_nodes):
            why[n.name] = "it reads or yields values other than tensors"
            continue
        if _op_name(n) in _PRODUCTS and any(_val(i).dtype not in _PRODUCT_DTYPES for i in n.args[-2:]):
            # Float32 products (PyTorch's math attention upcasts to them):
            # kfused's tensor-core path takes 16-bit operands only.
            why[n.name] = "kfused generates products of float16 and bfloat16 operands only"
            continue
        if _op_name(n) in _VIEWS and any(u.op == "output" for u in n.users):
            why[n.name] = "a view the graph returns (it aliases its input)"
            continue
        key = (n.target, repr(torch.fx.node.map_arg((n.args, n.kwargs), _static_spec)),
               _static_spec(n))
        if key not in seen:
            err = _trial([n])[1]
            seen[key] = None if err is None else err.message
        if seen[key] is None:
            out.add(n)
        else:
            why[n.name] = seen[key]
    # A copy joins a region only with every reader of it (alone it is no
    # chain: its output would be its input), so it never is a region's output.
    for n in reversed(nodes):
        if (n.op == "call_function" and _op_name(n) in _IDENTITIES and isinstance(_val(n), torch.Tensor)
                and len(n.all_input_nodes) == 1 and n.users and all(u in out for u in n.users)):
            out.add(n)
    return out


# Products and attention ops the framework may run faster than kfuse. Rates
# as fractions of kfused's tensor ceiling (DeviceInfo.ceilings.tensor_flops:
# mma.sync's, 644 TFLOP/s measured on an H200), H200 figures of the
# performance notebook: kfuse's products 0.63 (408-413 TFLOP/s at 4096^3 and
# 8192^3 with bias and GELU) against cuBLASLt's 1.07-1.11 (690-717, wgmma);
# kfuse's attention 0.38-0.51 (247-327, run45) against SDPA's default,
# cuDNN's, 0.82-0.93 (530-600). Not measured on other GPUs, where the
# framework's products use mma.sync too and the gap is likely smaller.
_PRODUCTS = frozenset({"mm", "bmm", "addmm"})
_PRODUCT_DTYPES = frozenset({torch.float16, torch.bfloat16})
_RATES = {"product": (0.63, 1.08), "attention": (0.45, 0.85)}  # (kfuse, framework)
_SOFTMAX = frozenset({"_softmax", "_safe_softmax", "_log_softmax"})
_NEAR_SOFTMAX = 6  # Nodes between a score product and its softmax, at most.
_CEILINGS_RETRY_S = 30.0  # After kfused gave no ceilings, ask again no sooner.


def _numel(node):
    v = _val(node)
    return v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0


def _attention_args(node):
    """{argument name: value} of an ATen attention op, by kfuse.torch's
    table of their schemas."""
    names = kt._ATTENTION_OPS[_op_name(node)][0]
    return dict(zip(names, node.args), **node.kwargs)


def _heavy_work(node):
    """(kind, FLOPs, bytes) of a product or an attention op with static
    shapes (bytes: its tensor inputs read once, its result written once),
    else None. An attention given a mask or bias is not counted: kfuse
    fuses the mask's computation into its kernel, where the framework
    stores it and picks a slower kernel."""
    name = _op_name(node)
    if name in _PRODUCTS:
        a, b = (_val(i) for i in node.args[-2:])
        out = _val(node)
        if not all(isinstance(t, torch.Tensor) and all(type(d) is int for d in t.shape)
                   for t in (a, b, out)):
            return None
        flops = 2.0 * out.numel() * a.shape[-1]
        read = sum(_numel(i) for i in node.all_input_nodes)
        return "product", flops, read + _numel(node)
    if name in kt._ATTENTION_OPS and node.op == "call_function":
        args = _attention_args(node)
        if args.get("attn_mask") is not None or args.get("attn_bias") is not None:
            return None
        q, k, v = (_val(args.get(x)) if isinstance(args.get(x), torch.fx.Node) else None
                   for x in ("query", "key", "value"))
        if not all(isinstance(t, torch.Tensor) and t.dim() >= 2 and all(type(d) is int for d in t.shape)
                   for t in (q, k, v)):
            return None
        flops = 2.0 * (q.numel() // q.shape[-1]) * k.shape[-2] * (q.shape[-1] + v.shape[-1])
        if args.get("is_causal"):
            flops /= 2
        return "attention", flops, sum(t.numel() * t.element_size() for t in (q, k, v, q))
    return None


def _beside_softmax(node):
    """Whether a product reads a softmax's result or feeds a softmax within
    _NEAR_SOFTMAX nodes, through no other product: a score or value product
    of an attention written out, which kfused fuses into one kernel."""
    for step in (lambda n: n.users, lambda n: n.all_input_nodes):
        seen, frontier = {node}, [node]
        for _ in range(_NEAR_SOFTMAX):
            frontier = [m for n in frontier for m in step(n) if m not in seen and m.op == "call_function"]
            if any(_op_name(m) in _SOFTMAX for m in frontier):
                return True
            frontier = [m for m in frontier if _op_name(m) not in _PRODUCTS]
            seen.update(frontier)
    return False


def _declined(node, candidates, ceilings):
    """Why the framework should run `node` rather than kfuse (a message),
    else None: its predicted time at the framework's rate, plus the store
    and read of its result by the fused ops after it, is below kfuse's
    (each the larger of compute at its rate and the bytes at the copy
    bandwidth). Small-M products, streaming their weights, stay kfuse's."""
    work = _heavy_work(node)
    if work is None or (work[0] == "product" and _beside_softmax(node)):
        return None
    kind, flops, nbytes = work
    mine, theirs = _RATES[kind]
    tensor, copy = ceilings.tensor_flops, ceilings.copy_bytes_per_second
    kfuse = max(flops / (mine * tensor), nbytes / copy)
    epilogue = 2 * _numel(node) if any(u in candidates and _op_name(u) not in _VIEWS
                                       for u in node.users) else 0
    framework = max(flops / (theirs * tensor), nbytes / copy) + epilogue / copy
    if kfuse <= framework:
        return None
    return (f"{kind} of {flops / 1e9:.3g} GFLOP, compute-bound: predicted {kfuse * 1e6:.3g} us fused, "
            f"{framework * 1e6:.3g} us by the framework with its result stored and read back "
            f"(kfuse at {mine:.2f} of the tensor ceiling, the framework at {theirs:.2f}); "
            f"Backend(products=\"kfuse\") fuses it")


def partition(nodes, candidates):
    """Regions (lists of nodes in graph order, ordered by their first node):
    candidates merged along data edges, skipping merges that would make the
    graph of regions and other nodes cyclic. `nodes` in topological order."""
    bit = {n: 1 << k for k, n in enumerate(nodes)}
    anc = {}  # node -> bitmask of its ancestors
    for n in nodes:
        a = 0
        for i in n.all_input_nodes:
            a |= bit[i] | anc[i]
        anc[n] = a
    parent, members, mask, ranc, region_of = {}, {}, {}, {}, {}

    def find(r):
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    def cyclic(roots, n):
        """Whether regions `roots` and node n as one region would close a
        cycle: a path from it through nodes (or regions) outside back into it."""
        inside = bit[n]
        for r in roots:
            inside |= mask[r]
        sources = [n] + [m for r in roots for m in members[r]] if len(roots) > 1 else [n]
        reach = 0
        for m in sources:
            for i in m.all_input_nodes:
                if not bit[i] & inside:
                    reach |= bit[i] | anc[i]
        expanded = set(roots)
        grew = True
        while grew:  # Close over regions: reaching one member reaches all its inputs.
            if reach & inside:
                return True
            grew = False
            for r in members:
                if r not in expanded and reach & mask[r]:
                    expanded.add(r)
                    reach |= ranc[r]
                    grew = True
        return False

    for n in nodes:
        if n not in candidates:
            continue
        near = []
        for i in n.all_input_nodes:
            r = find(region_of[i]) if i in region_of else None
            if r is not None and r not in near:
                near.append(r)
        chosen = []
        for r in near:
            if not cyclic(chosen + [r], n):
                chosen.append(r)
        if chosen:
            root = chosen[0]
            for r in chosen[1:]:
                parent[r] = root
                members[root] += members.pop(r)
                mask[root] |= mask.pop(r)
                ranc[root] |= ranc.pop(r)
        else:
            root = len(parent)
            parent[root], members[root], mask[root], ranc[root] = root, [], 0, 0
        region_of[n] = root
        members[root].append(n)
        mask[root] |= bit[n]
        ranc[root] |= anc[n]
    index = {n: k for k, n in enumerate(nodes)}
    regions = [sorted(m, key=index.get) for m in members.values()]
    return sorted(regions, key=lambda m: index[m[0]])


def _compute_ops(nodes):
    # A split's getitems pick views too.
    return sum(1 for n in nodes if _op_name(n) not in _VIEWS | _IDENTITIES and n.target is not operator.getitem)


# Compute ops a piece starts from: each is at least one chain op, and kfused
# takes 512 (kfuse.LIMITS); a piece whose chain is longer is halved.
_PIECE_OPS = LIMITS["ops"]
_CUT_WINDOW = 16  # Cuts tried below the longest piece, for fewer values crossing.


def _cut(rest, k):
    """(the first k nodes of `rest` with the getitems of the splits among
    them, the others): a prefix in graph order, so neither reads the other
    in a cycle."""
    head = set(rest[:k])
    for n in rest[k:]:
        if n.target is operator.getitem and n.args[0] in head:
            head.add(n)
    return [n for n in rest if n in head], [n for n in rest if n not in head]


def _fits(piece, ops, nodes):
    """Whether `piece` looks like a chain kfused takes, by counts: its
    inputs and outputs within kfuse.LIMITS, at most `ops` compute ops and
    `nodes` nodes."""
    inputs, outputs = _boundary(piece)
    return (len(inputs) <= LIMITS["inputs"] and len(outputs) <= LIMITS["outputs"]
            and _compute_ops(piece) <= ops and len(piece) <= nodes)


def _within_limits(members):
    """A region as pieces kfused takes in one chain each, with their trials
    (_trial): the whole region where it fits; else the longest prefix that
    fits by counts (_fits), its cut moved back (at most _CUT_WINDOW nodes)
    to where the fewest values cross it, then the rest the same way. A piece
    whose chain is still too large (kt.TooLarge) is tried again at half its
    compute ops and nodes; one of a single node (with a split's getitems)
    is left with its error."""
    pieces, rest = [], list(members)
    ops, nodes = _PIECE_OPS, len(rest)
    while rest:
        k = len(rest)
        if not _fits(rest, ops, nodes):
            lo, hi = 1, len(rest) - 1  # The longest fitting prefix, by bisection.
            while lo < hi:
                mid = (lo + hi + 1) // 2
                lo, hi = (mid, hi) if _fits(_cut(rest, mid)[0], ops, nodes) else (lo, mid - 1)
            window = range(max(1, lo - _CUT_WINDOW), lo + 1)
            k = min(window, key=lambda c: (len(_boundary(_cut(rest, c)[0])[1]), -c))
        piece, left = _cut(rest, k)
        trial = _trial(piece)
        if isinstance(trial[1], kt.TooLarge) and k > 1:  # Smaller each time: k halves at least.
            ops, nodes = max(1, _compute_ops(piece) // 2), max(1, k // 2)
            continue
        pieces.append((piece, trial))
        rest, ops, nodes = left, _PIECE_OPS, len(left)
    return pieces


class Region(kt.FusedFunction):
    """One fused region of a compiled graph; call it with its input tensors.
    `nodes`: the ATen node names; `gm`: its sub-graph; `inputs` / `outputs`:
    node names it reads / yields; `specs`: (dtype, shape) per input at
    compile time (None where dynamic); `chain`: its kfuse.Chain where shapes
    are static. plan_for, chain_for and cache as on FusedFunction."""

    warns_of_compute_bound = False  # The backend's products setting chose them.

    def __init__(self, owner, name, gm, nodes, inputs, outputs, chain):
        ident = name.replace(".", "_")

        def run(*args):
            return gm(*args)

        run.__name__ = run.__qualname__ = f"kfuse_{ident}"
        specs = [_static_spec(i) for i in inputs]
        # A graph dynamo made with symbolic sizes (a shape changed): one plan
        # per bucket of rows where the region's chain does not read them.
        super().__init__(run, owner.client, owner.fallback, owner.mode, "fx", owner.launcher,
                         dynamic=None in specs)
        self.gpu_only = owner.gpu_only
        self.owner, self.gm, self.chain = owner, gm, chain
        self.nodes = [n.name for n in nodes]
        self.inputs = [i.name for i in inputs]
        self.outputs = [o.name for o in outputs]
        self.specs = specs
        ops = list(dict.fromkeys(_op_name(n) for n in nodes))
        self.name = f"{name} ({', '.join(ops)})"

    def graph(self):
        return self.gm

    def cached_plan(self, *tensors):
        """The plan these tensors launch, if compiled already; no RPC."""
        entry = self.cache.peek(kt._signature(tensors)[1])
        return getattr(entry, "plan", None)

    def _warn_once(self, key, message):
        self.owner._warn_once(key, message)


@dataclasses.dataclass
class CompiledGraph:
    """What compile_inference made of one ATen graph: `gm` runs it."""
    gm: torch.fx.GraphModule
    regions: list
    eager: list  # names of the ATen ops that run eagerly
    declined: dict = dataclasses.field(default_factory=dict)  # eager by choice: name -> why
    why_eager: dict = dataclasses.field(default_factory=dict)  # every eager op: name -> why

    def summary(self):
        """What was fused and what runs eagerly, and why, as text."""
        fused = sum(len(r.nodes) for r in self.regions)
        lines = [f"{len(self.regions)} region(s) of {fused} ATen node(s); {len(self.eager)} op(s) eager"]
        lines += [f"  {r.name}" for r in self.regions]
        by_reason = collections.defaultdict(list)
        for name in self.eager:
            by_reason[self.why_eager.get(name, "a view or a value no region reads")].append(name)
        for reason, names in by_reason.items():
            lines.append(f"  eager: {', '.join(names)}: {reason}")
        return "\n".join(lines)


class Backend:
    """A torch.compile backend. client / fallback / mode / launcher as for
    kfuse.torch.fuse; min_ops: regions with fewer compute ops run eagerly;
    products="framework" leaves compute-bound products and attention ops
    to PyTorch where its kernels are predicted faster (CompiledGraph.declined
    says why), "kfuse" fuses them as any other op;
    gpu_only=False (tests, with a fake launcher) lets host tensors take the
    launch path. `graphs` holds the last `keep_graphs` CompiledGraphs made,
    `regions` their regions."""

    def __init__(self, client=None, fallback="warn", mode="quick", launcher=None, min_ops=2,
                 gpu_only=True, keep_graphs=256, products="framework"):
        if products not in ("framework", "kfuse"):
            raise ValueError(f"products must be 'framework' or 'kfuse'; got {products!r}")
        if fallback not in kt._FALLBACKS:
            raise ValueError(f"fallback must be one of {kt._FALLBACKS}; got {fallback!r}")
        if mode not in (None, "heuristic", "quick", "full"):
            raise ValueError(f"mode must be 'heuristic', 'quick' or 'full'; got {mode!r}")
        if not isinstance(min_ops, int) or isinstance(min_ops, bool) or min_ops < 1:
            raise ValueError(f"min_ops must be an int >= 1; got {min_ops!r}")
        self.client, self.fallback, self.mode, self.launcher = client, fallback, mode, launcher
        self.min_ops, self.gpu_only, self.products = min_ops, gpu_only, products
        self._device_ceilings, self._ceilings_retry_at = None, 0.0
        self.graphs = collections.deque(maxlen=keep_graphs)
        self._lock = threading.Lock()
        self._warned = set()
        self._aot = None
        self._local = threading.local()  # Whether the graph compile_inference saw last fused anything.

    @property
    def regions(self):
        return [r for g in self.graphs for r in g.regions]

    def __call__(self, gm, example_inputs):
        """The dynamo entry: refuses graphs that need gradients, hands the
        rest to aot_autograd with compile_inference for inference graphs."""
        if torch.is_grad_enabled() and (
                any(isinstance(a, torch.Tensor) and a.requires_grad for a in example_inputs)
                or any(p.requires_grad for p in gm.parameters())):
            return _inference_only
        if self._aot is None:
            self._aot = _aot_autograd(fw_compiler=_refuse_training, bw_compiler=_refuse_training,
                                      inference_compiler=self.compile_inference)
        self._local.fused = None
        compiled = self._aot(gm, example_inputs)
        if self._local.fused is False:
            # Nothing to fuse: the graph as dynamo captured it runs as eager
            # would, without aot_autograd's wrappers (tens of microseconds a
            # call on the host, bench/results/host-overhead).
            return gm.forward
        return compiled

    def compile_inference(self, gm, example_inputs=None):
        """A GraphModule running `gm` (an ATen graph) with its regions fused."""
        number = next(_graph_numbers)
        nodes = list(gm.graph.nodes)
        with _no_fake_mode():
            regions, chains, why, declined = self._regions(nodes)
        why.update((n, f"left to PyTorch: {w}") for n, w in declined.items())
        self._local.fused = bool(regions)
        if not regions:
            eager = _eager_names(nodes, set())
            with self._lock:
                self.graphs.append(CompiledGraph(gm, [], eager, declined, _only(why, eager)))
            return gm
        fused = []
        for k, (members, chain) in enumerate(zip(regions, chains)):
            sub, inputs, outputs = _subgraph(members)
            fused.append(Region(self, f"graph{number}.region{k}", sub, members, inputs, outputs, chain))
        new = _rebuild(gm, nodes, regions, fused)
        in_regions = {n for m in regions for n in m}
        eager = _eager_names(nodes, in_regions)
        compiled = CompiledGraph(new, fused, eager, declined, _only(why, eager))
        with self._lock:
            self.graphs.append(compiled)
        return new

    def _regions(self, nodes):
        """The regions to fuse, their chains (None where shapes are
        dynamic), {node name: why} of the ops left out, and of those the
        products and attention ops left to the framework (_declined); a
        region larger than kfused takes in one chain is cut into pieces
        (_within_limits)."""
        why, declined = {}, {}
        candidates = _candidates(nodes, why)
        heavy = [n for n in nodes if n in candidates and _heavy_work(n) is not None]
        ceilings = self._ceilings() if heavy and self.products == "framework" else None
        if ceilings is not None:
            for n in heavy:
                w = _declined(n, candidates, ceilings)
                if w is not None:  # With its getitems: a tuple-valued op's unit (_split_unit).
                    declined[n.name] = w
                    candidates -= {n, *(u for u in n.users if u.target is operator.getitem)}
        while True:
            regions, chains, refused = [], [], set()
            for whole in partition(nodes, candidates):
                for members, (chain, err) in _within_limits(whole):
                    if err is not None:  # The node it names, else the whole piece, runs eagerly.
                        named = [n for n in members if n.name == err.node]
                        refused.update(named or members)
                        for n in named or members:
                            why[n.name] = err.message
                    regions.append(members)
                    chains.append(chain)
            if not refused:
                break
            candidates -= refused
        keep = [k for k, m in enumerate(regions) if _compute_ops(m) >= self.min_ops]
        for k, m in enumerate(regions):
            if k not in keep:
                ops = _compute_ops(m)
                for n in m:
                    why.setdefault(n.name, "views alone: no kernel to fuse" if ops == 0 else
                                   f"a region of {ops} compute op(s), below min_ops={self.min_ops} "
                                   "(one op is one PyTorch kernel already)")
        return [regions[k] for k in keep], [chains[k] for k in keep], why, declined

    def _ceilings(self):
        """kfused's Ceilings (measured on its GPU, else its nominal ones),
        asked once; None when it cannot answer (nothing is declined then:
        every region falls back to eager anyway while it is unreachable)."""
        if self._device_ceilings is None and time.monotonic() >= self._ceilings_retry_at:
            client = self.client if self.client is not None else kt._default_client()
            try:
                c = client.device_info(timeout=5).ceilings
            except Exception as e:  # noqa: BLE001 (any client's failure: unreachable, refused, a double)
                self._ceilings_retry_at = time.monotonic() + _CEILINGS_RETRY_S
                self._warn_once(("ceilings", type(e).__name__),
                                f"kfused gave no device ceilings ({e}); compute-bound products "
                                "are fused as any other op")
                return None
            if c.tensor_flops > 0 and c.copy_bytes_per_second > 0:
                self._device_ceilings = c
        return self._device_ceilings

    def _warn_once(self, key, message):
        kt.warn_once(self, key, f"kfuse.backend: {message}")


def _only(why, names):
    return {n: why[n] for n in names if n in why}


def _eager_names(nodes, in_regions):
    return [n.name for n in nodes if n.op == "call_function" and n not in in_regions
            and n.target is not operator.getitem]


def _rebuild(gm, nodes, regions, fused):
    """A GraphModule with each region replaced by a call of its Region and
    getitems of its outputs, steps in an order that respects every edge."""
    index = {n: k for k, n in enumerate(nodes)}
    step_of = {}
    for k, members in enumerate(regions):
        for n in members:
            step_of[n] = ("region", k)
    body = [n for n in nodes if n.op != "output"]
    steps = {}
    for n in body:
        steps.setdefault(step_of.get(n, ("node", n)), []).append(n)
    preds = {s: set() for s in steps}
    succs = {s: set() for s in steps}
    for s, members in steps.items():
        for n in members:
            for i in n.all_input_nodes:
                p = step_of.get(i, ("node", i))
                if p != s:
                    preds[s].add(p)
                    succs[p].add(s)
    first = {s: index[m[0]] for s, m in steps.items()}
    ready = [(first[s], s) for s in steps if not preds[s]]
    heapq.heapify(ready)
    g, env, done = torch.fx.Graph(), {}, 0
    while ready:
        _, s = heapq.heappop(ready)
        done += 1
        if s[0] == "node":
            env[s[1]] = g.node_copy(s[1], lambda a: env[a])
        else:
            region = fused[s[1]]
            call = g.call_function(region, tuple(env[i] for i in _nodes_named(nodes, region.inputs)))
            for k, o in enumerate(_nodes_named(nodes, region.outputs)):
                env[o] = g.call_function(operator.getitem, (call, k))
                env[o].meta = dict(o.meta)
        for t in succs[s]:
            preds[t].discard(s)
            if not preds[t]:
                heapq.heappush(ready, (first[t], t))
    if done != len(steps):
        raise AssertionError("kfuse.backend: the region graph has a cycle")  # A partition bug.
    out = nodes[-1]
    g.node_copy(out, lambda a: env[a])
    g.lint()
    return torch.fx.GraphModule(gm, g)


def _nodes_named(nodes, names):
    by_name = {n.name: n for n in nodes}
    return [by_name[x] for x in names]


def _inference_only(*args):
    raise NotImplementedError(
        "kfuse.backend is inference-only for now: this compiled graph has an input (or parameter) "
        "that requires grad while grad mode is on; call it under torch.no_grad() / "
        "torch.inference_mode(), or detach the inputs")


def _refuse_training(gm, example_inputs):
    raise NotImplementedError("kfuse.backend is inference-only for now: aot_autograd asked for a "
                              "training graph (forward and backward); run under torch.no_grad()")


def _aot_autograd(**kwargs):
    try:
        from torch._dynamo.backends.common import aot_autograd
    except ImportError:  # pragma: no cover (older layouts)
        from torch._functorch.aot_autograd import aot_module_simplified

        return lambda gm, example_inputs: aot_module_simplified(gm, example_inputs, **kwargs)
    return aot_autograd(**kwargs)


backend = Backend()


def _register():
    try:
        from torch._dynamo import register_backend
    except ImportError:  # pragma: no cover
        return
    try:
        register_backend(backend, name="kfuse")
    except AssertionError:  # Registered already (the module was reloaded).
        pass


_register()

__all__ = ["Backend", "backend", "Region", "CompiledGraph", "partition"]
