"""Tensor helpers every layer shares: broadcast reductions back to an input's shape (sum, any),
expanding a reduced result, NaN-aware comparison of branch ids, a fast finiteness test,
flat → multi-dimensional indices, a walk over an autograd graph, and inputs made leaves for an
ordinary call (`as_leaves`, `plain_value`), a Parameter passed on as one (`as_given`). Pure
torch, no gradscope imports."""

# Long: the helpers every layer shares, each a few lines on plain tensors and graphs; cut by
# where they are used, each piece would be imported by most layers anyway.

from __future__ import annotations

import contextvars
import math
from collections.abc import Iterator, Mapping
from typing import Any

import torch


def from_triangle(a: torch.Tensor, upper: bool) -> torch.Tensor:
    """The symmetric matrix that one triangle of `a` stands for (what eigvalsh, cholesky and
    hermitian pinv read), written with that triangle only."""
    return (a.triu() + a.triu(1).mT) if upper else (a.tril() + a.tril(-1).mT)


def triangle_adjoint(g: torch.Tensor, upper: bool) -> torch.Tensor:
    """`from_triangle`'s adjoint: a gradient over the symmetric matrix as one per entry of
    `a` (an entry of the triangle read stands twice off the diagonal, the other triangle
    nowhere)."""
    both = g + g.mT
    half = both.triu(1) if upper else both.tril(-1)
    return half + torch.diag_embed(g.diagonal(dim1=-2, dim2=-1))


def as_leaves(values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """`values` as leaves that require grad (the floating ones), sharing their storage."""
    return {n: v.detach().requires_grad_(v.is_floating_point()) for n, v in values.items()}


def plain_value(forward: Any, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """`forward`'s value as an ordinary call makes it: in grad mode, its inputs leaves that
    require grad (code that registers a hook or differentiates inside its forward needs
    both), the graph dropped."""
    with torch.enable_grad():
        return forward(as_leaves(values)).detach()


def as_given(value: Any, given: Any) -> Any:
    """gradscope's tensor `value` for an input the user gave as `given`, of given's kind where
    that is a Parameter (code assigns it to a module, which takes Parameters only): a leaf that
    requires grad becomes one itself — autograd differentiates with respect to that very
    object, so it cannot be a new one sharing its storage — a tensor that does not require
    grad (finite differences' values) is wrapped in one. A computed tensor cannot be a
    Parameter (a module refuses non-leaves too) and is passed on as it is."""
    if not isinstance(given, torch.nn.Parameter) or not isinstance(value, torch.Tensor) \
            or isinstance(value, torch.nn.Parameter) or value.grad_fn is not None \
            or type(value) is not torch.Tensor:
        return value
    if value.requires_grad:
        value.__class__ = torch.nn.Parameter  # (gradscope's own leaf, never the user's)
        return value
    return torch.nn.Parameter(value, requires_grad=False)


def readable(t: torch.Tensor) -> bool:
    """Whether `t`'s elements can be read: its storage holds every element it addresses (code
    that frees a tensor's memory — `x.untyped_storage().resize_(0)`, as reversible networks do
    to their inputs until backward restores them — leaves a tensor whose reading would fault).
    A tensor with no storage of its own (a batched or wrapped one) is not readable here."""
    if t.numel() == 0:
        return True
    try:
        held = t.untyped_storage().nbytes()
    except (NotImplementedError, RuntimeError):
        return False
    last = t.storage_offset() + sum((n - 1) * abs(s) for n, s in zip(t.shape, t.stride(),
                                                                      strict=True))
    return held >= (last + 1) * t.element_size()


def all_finite(t: torch.Tensor) -> bool:
    """True when no element is NaN or infinite. One float64 sum decides in the usual case (it
    is finite only if every element is; isfinite is a slower pass over large tensors); only an
    overflowing or non-finite sum pays for the exact test."""
    if not t.is_floating_point() or t.numel() == 0:
        return True
    if math.isfinite(float(torch.sum(t.detach(), dtype=torch.float64))):
        return True
    return bool(torch.isfinite(t).all())


def max_abs(t: torch.Tensor) -> float:
    """max |t| (NaN if any element is; 0 for none), read off one aminmax pass: the infinity
    norm's kernel takes about ten times as long over a million float64 elements."""
    if t.numel() == 0:
        return 0.0
    low, high = torch.aminmax(t.detach())
    return max(-float(low), float(high))


DIFFERENCE_BLOCK = 1 << 18  # elements of a difference held at a time (2 MB in float64)


def max_abs_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a − b| over two tensors of one shape (NaN if any difference is), a block at a time
    into one buffer where both are contiguous: the difference of two model-sized tensors (or
    of two million-element ones, out of cache) is never held whole."""
    a, b = a.detach(), b.detach()
    n = a.numel()
    if n <= DIFFERENCE_BLOCK or a.shape != b.shape or not (a.is_contiguous()
                                                            and b.is_contiguous()):
        return max_abs(a - b)
    flat_a, flat_b = a.reshape(-1), b.reshape(-1)
    buf = torch.empty(DIFFERENCE_BLOCK, dtype=torch.promote_types(a.dtype, b.dtype),
                      device=a.device)
    top = 0.0
    for start in range(0, n, DIFFERENCE_BLOCK):
        stop = min(n, start + DIFFERENCE_BLOCK)
        part = torch.sub(flat_a[start:stop], flat_b[start:stop], out=buf[:stop - start])
        found = max_abs(part)
        if math.isnan(found):
            return found
        top = max(top, found)
    return top


def branch_changed(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Elementwise 'on a different branch' for branch ids, where two NaNs count as the same."""
    if a is b:  # a reused subexpression: the same tensor, unchanged by construction
        return torch.zeros((), dtype=torch.bool, device=a.device).expand(a.shape)
    diff = a != b
    if a.is_floating_point():
        diff = diff & ~(torch.isnan(a) & torch.isnan(b))
    return diff


def same_gradient(again: torch.Tensor | None, first: torch.Tensor) -> bool:
    """Whether a second backward's gradient equals the first element for element (None, an
    unused input: where the first is all zeros). Anything else — a NaN included — is no."""
    first = first.detach()
    if again is None:
        return not bool(first.any())
    again = again.detach()
    if again.shape != first.shape or again.dtype != first.dtype or again.layout != first.layout:
        return False
    try:
        return torch.equal(again, first)
    except (RuntimeError, TypeError, NotImplementedError):  # (a subclass: no shortcut)
        return False


def differing(first: torch.Tensor, again: torch.Tensor | None) -> tuple[torch.Tensor,
                                                                         torch.Tensor]:
    """Where a second answer to one question differs from the first: (flat indices, |again −
    first| there in float64, infinite where one is NaN or infinite and the other is not). Two
    NaNs are the same answer; an unused input's None is its zeros. Only the differing
    elements are kept (none, the usual case, costs one comparison)."""
    first = first.detach()
    again = torch.zeros_like(first) if again is None else again.detach()
    empty = (torch.zeros(0, dtype=torch.long, device=first.device),
             torch.zeros(0, dtype=torch.float64, device=first.device))
    if same_gradient(again, first):
        return empty
    if again.shape != first.shape:
        flat = torch.arange(first.numel(), device=first.device)
        return flat, torch.full((first.numel(),), math.inf, dtype=torch.float64,
                                device=first.device)
    a, b = first.reshape(-1), again.reshape(-1).to(first.device)
    off = ~((a == b) | (torch.isnan(a) & torch.isnan(b)))
    at = off.nonzero().flatten()
    gap = (b[at].to(torch.float64) - a[at].to(torch.float64)).abs()
    return at, gap.nan_to_num_(nan=math.inf)


def gap(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    """max |got − want| (NaN in both places, or the same infinity, counting as agreement; NaN
    in one as infinite) and the scale it is read against: max(1, max |want|) — what a
    shortcut's answer is judged by beside the plain call's."""
    a, b = got.detach().to(torch.float64), want.detach().to(torch.float64).to(got.device)
    diff = (a - b).abs().masked_fill_((torch.isnan(a) & torch.isnan(b)) | (a == b), 0.0)
    top = float(diff.nan_to_num(nan=math.inf).max()) if diff.numel() else 0.0
    scale = float(b.abs().nan_to_num(0.0, 0.0, 0.0).max()) if b.numel() else 0.0
    return top, max(scale, 1.0)


def ulp_signs(values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """±1 per element of each floating tensor, seeded (0), in the tensors' dtype and device:
    the directions inputs are moved in to measure a computation's round-off."""
    gens: dict[torch.device, torch.Generator] = {}
    return {k: _signs(v, gens) for k, v in values.items() if v.is_floating_point()}


def _signs(v: torch.Tensor, gens: dict[torch.device, torch.Generator],
           into: torch.Tensor | None = None) -> torch.Tensor:
    # (drawn in the tensor's dtype: the same draws as int64 ones, without an 8-byte-per-element
    # intermediate the size of a model; on the tensor's own device, by a generator seeded 0
    # there: a GPU draws a model's signs in milliseconds, its host in seconds; `into`, a
    # tensor like v: drawn into it)
    gen = gens.get(v.device)
    if gen is None:
        gen = gens[v.device] = torch.Generator(device=v.device).manual_seed(0)
    if into is not None:
        return torch.randint(0, 2, v.shape, generator=gen, out=into).mul_(2).sub_(1)
    return torch.randint(0, 2, v.shape, generator=gen, dtype=v.dtype, device=v.device) \
        .mul_(2).sub_(1)


def broadcast(t: torch.Tensor) -> bool:
    """Whether every element of `t` is one stored value (a scalar expanded to a shape: a
    model-sized answer of nothing, which a reshape(-1) would copy)."""
    return t.numel() > 0 and not any(t.stride())


def moved_by(values: Mapping[str, torch.Tensor], relative: float,
             signs: Mapping[str, torch.Tensor] | None = None,
             scratch: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """`values` moved by `relative`·|v| in the `signs` directions (the others as they are;
    none given: ulp_signs', drawn one tensor at a time, so that they are never all held at
    once beside the moved copy). One new tensor per value (|v|·sign·relative + v, in place):
    at a model's size a temporary |v| beside the result is a second copy of the model.
    `scratch`: the moved copies are written into its tensors, kept there for the next call,
    which writes over them (a model's copy made once, not faulted in anew by each call)."""
    gens: dict[torch.device, torch.Generator] = {}
    out = {}
    for k, v in values.items():
        if signs is not None:
            sign = signs.get(k)
            moved = None if sign is None else torch.copysign(v, sign)
        elif v.is_floating_point():  # (|v|·sign written over the drawn signs: one tensor)
            into = held_like(scratch, k, v) if scratch is not None else None
            sign = _signs(v, gens, into)
            moved = torch.copysign(v, sign, out=sign)
        else:
            moved = None
        # (a view: each call's copy is a tensor object of its own, for code caching by tensor)
        out[k] = v if moved is None else moved.mul_(relative).add_(v).view_as(v)
    return out


def held_like(scratch: dict[str, torch.Tensor], k: str, like: torch.Tensor) -> torch.Tensor:
    """scratch[k] where it can hold a tensor like `like` (shape, dtype, device); else a new
    one, kept there for the next call."""
    held = scratch.get(k)
    if held is None or (held.shape, held.dtype, held.device) != (like.shape, like.dtype,
                                                                 like.device):
        held = scratch[k] = torch.empty_like(like)
    return held


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether `a` lives in `b`'s storage (an output that is its input, or a view of it);
    True where a tensor has no storage to compare (a subclass): then it is copied."""
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError, TypeError):
        return True


def weighted(v: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """v · t elementwise (broadcast), 0 where v is 0: an output element an upstream leaves
    out (NaN or infinite where the function is undefined) adds nothing, not 0·NaN."""
    product = v * t
    if not bool((v == 0).any()):
        return product
    return torch.where(v == 0, torch.zeros((), dtype=product.dtype, device=product.device),
                       product)


def sum_to_shape(t: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """Sum `t` over the dimensions that broadcasting added to `shape` (the adjoint of expand)."""
    shape = tuple(shape)
    if tuple(t.shape) == shape:
        return t
    lead = t.ndim - len(shape)
    if lead > 0:
        t = t.sum(dim=tuple(range(lead)))
    dims = tuple(i for i, n in enumerate(shape) if n == 1 and t.shape[i] != 1)
    if dims:
        t = t.sum(dim=dims, keepdim=True)
    return t.reshape(shape)


def any_to_shape(mask: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """True where any broadcast copy of an element of `shape` is True in `mask`."""
    return sum_to_shape(mask.to(torch.float64), shape) > 0


def expand_reduced(g: torch.Tensor, like: torch.Tensor, dim: int | tuple[int, ...] | None,
                   keepdim: bool = False) -> torch.Tensor:
    """Undo a reduction's shape: broadcast `g` back over `like` (the reduced tensor), for a
    reduction over `dim` (an int, a tuple, or None: all) with or without keepdim."""
    if like.ndim == 0:  # reducing a scalar (even over dim -1) leaves a scalar
        return g.reshape(())
    if not keepdim:
        dims = range(like.ndim) if dim is None else (dim,) if isinstance(dim, int) else dim
        for d in sorted(d % like.ndim for d in dims):
            g = g.unsqueeze(d)
    return g.expand_as(like)


def reduced_count(x: torch.Tensor, dim: int | tuple[int, ...] | None) -> int:
    """How many elements a reduction over `dim` takes in per result."""
    if dim is None or x.ndim == 0:
        return x.numel()
    dims = (dim,) if isinstance(dim, int) else dim
    count = 1
    for d in set(d % x.ndim for d in dims):
        count *= x.shape[d]
    return count


def multi_index(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for n in reversed(shape):
        out.append(flat % n)
        flat //= n
    return list(reversed(out))


def compiled_inside(output: Any) -> bool:
    """Whether AOTAutograd's compiled backward (torch.compile) is in `output`'s graph: a graph
    that may donate its saved buffers to its one backward, which then refuses
    `retain_graph`."""
    return any(type(node).__name__ == "CompiledFunctionBackward"
               for node in grad_nodes(getattr(output, "grad_fn", None)))


# the metadata key and value that mark gradscope's own node in a graph: the copy of an input
# the user's code received (targets/code.py), which graphs and traces look through
OWN_NODE = ("gradscope", "input copy")
# set while gradscope does work of its own inside a call of the user's code: gradscope's torch
# function modes (which count, watch or record the user's ops) let it pass unseen
_OWN_WORK = contextvars.ContextVar("gradscope_own_work", default=False)


def own_work() -> bool:
    """Whether the torch function being called is gradscope's own (`own_copy`'s), not the
    user's code's: a mode that counts, watches or records the user's ops passes it on."""
    return _OWN_WORK.get()


def own_copy(value: torch.Tensor) -> torch.Tensor:
    """A copy of `value` with storage of its own, differentiable where `value` requires grad
    (its node marked as gradscope's own: `own_node`), made unseen by gradscope's modes."""
    token = _OWN_WORK.set(True)
    try:
        if not value.requires_grad:
            return value.detach().clone()
        copied = value.clone()
    finally:
        _OWN_WORK.reset(token)
    if copied.grad_fn is not None:
        copied.grad_fn.metadata[OWN_NODE[0]] = OWN_NODE[1]
    return copied


def own_node(node: Any) -> bool:
    """Whether a graph node is gradscope's own input copy (`own_copy`)."""
    metadata = getattr(node, "metadata", None)
    return isinstance(metadata, dict) and metadata.get(OWN_NODE[0]) == OWN_NODE[1]


def through_own(children: Iterator[Any] | list[Any]) -> list[Any]:
    """Graph children, gradscope's own input copies replaced by what they copy."""
    out = []
    for child in children:
        while child is not None and own_node(child):
            child = child.next_functions[0][0] if child.next_functions else None
        if child is not None:
            out.append(child)
    return out


def grad_nodes(root: Any) -> Iterator[Any]:
    """Every node of the autograd graph below `root` (a grad_fn; None: none), each once,
    a node before the nodes only it reaches."""
    # A node's Python object lives only while referenced (torch makes a new one on the next
    # access): every node seen is held, or a new object at a freed one's address would share
    # its id and be taken as seen.
    stack, seen, held = [root], set(), []
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        held.append(node)
        yield node
        stack.extend(child for child, _ in node.next_functions)


def _once_code() -> Any:
    from torch.autograd.function import once_differentiable
    return once_differentiable(lambda ctx: None).__code__


def once_differentiable_in(output: torch.Tensor) -> list[type]:
    """The custom Function classes in `output`'s graph whose backward is decorated with
    `@once_differentiable` (torch refuses to differentiate their backward again)."""
    code, found = _once_code(), []
    for node in grad_nodes(output.grad_fn):
        cls = getattr(node, "_forward_cls", None)
        backward = getattr(cls, "backward", None)
        if getattr(backward, "__code__", None) is code and cls not in found:
            found.append(cls)
    return found


MASK_CHUNK = 1 << 20


def first_true(mask: torch.Tensor, m: int) -> torch.Tensor:
    """Flat indices of the first `m` True elements of a flat mask, read a chunk at a time: the
    mask may be nearly every element of a model (its unchecked parameters, error 0, tied at
    a report's cut), and all their indices at once are eight bytes each."""
    found, start, n = [], 0, mask.numel()
    while m > 0 and start < n:
        part = torch.nonzero(mask[start:start + MASK_CHUNK]).reshape(-1)[:m] + start
        found.append(part)
        m -= part.numel()
        start += MASK_CHUNK
    return torch.cat(found) if found else torch.zeros(0, dtype=torch.int64, device=mask.device)
