"""One gradcheck call as the drop-in sees it: the function, its arguments, which of them are
checked, which outputs are compared — and the function of the checked tensors alone that
gradscope's engines evaluate.

As torch does, only floating tensors with `requires_grad` are checked; everything else reaches
`func` untouched. Zero-element tensors have no Jacobian entries: they are passed as they are
and not checked (a call where nothing is left has nothing to compare). A checked input whose
layout is not a plain contiguous tensor of its own storage (a view with a storage offset, a
slice of a larger storage, transposed strides) reaches `func` with that layout: gradscope's
perturbed copies are written into a copy of the whole storage, so `as_strided` and stride-
dependent code see what they saw in the caller's tensor."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import torch

from gradscope.errors import GradscopeError
from gradscope.tensors import as_given, compiled_inside, grad_nodes

VJP_SEED = 0x5EED  # the random upstream of `random_vjp`


@dataclass
class GradcheckCall:
    """One gradcheck call: the function, its arguments, which of them are checked."""

    func: Callable[..., Any]
    args: tuple[Any, ...]
    checked: list[int]  # positions of non-empty floating tensors that require grad
    names: list[str]
    outputs: list[int] = field(default_factory=list)  # non-empty differentiable outputs
    float_outputs: list[int] = field(default_factory=list)  # positions of floating outputs
    single: bool = True  # func returned one tensor (not a tuple or list)
    complex: bool = False  # a complex input or output: torch's gradcheck runs it whole
    empty: list[str] = field(default_factory=list)  # what has no elements ("input 1 (0, 3)")
    differentiable: int = 0  # differentiable outputs, empty or not
    # func's outputs at the given arguments, with their graph: the fast check and the plumbing
    # checks take their backwards from it (each keeps the graph) instead of new forwards. It
    # is taken at copies of the checked tensors (`leaves`, gradscope's own, which those
    # backwards differentiate by), so that it also shows whether func reaches the originals
    first: list[Any] = field(default_factory=list, repr=False)
    leaves: list[torch.Tensor] = field(default_factory=list, repr=False)
    _vjp: tuple[torch.Tensor, torch.Tensor, tuple] | None = field(default=None, repr=False)

    @classmethod
    def of(cls, func: Callable[..., Any], inputs: Any) -> GradcheckCall:
        args = tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)
        grads = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                 and a.requires_grad and (a.is_floating_point() or a.is_complex())]
        if not grads:
            raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                             "but none of the them have requires_grad=True.")
        checked = [i for i in grads if args[i].numel()]
        call = cls(func, args, checked, _names(func, len(args), checked))
        call.empty = [f"input {i} {tuple(args[i].shape)}" for i in grads if not args[i].numel()]
        call.leaves = [as_given(args[i].detach().clone().requires_grad_(True), args[i])
                       for i in checked]
        grad_mode = torch.is_grad_enabled()
        try:
            out = func(*call.arguments(call.leaves))
        finally:  # (func may leave grad mode off: gradscope's own calls need it as it was)
            torch.set_grad_enabled(grad_mode)
        call.single = isinstance(out, torch.Tensor)
        outs = [out] if call.single else list(out) if isinstance(out, tuple | list) else None
        if outs is None:
            raise GradscopeError(f"gradcheck: func returned {type(out).__name__}; expected a "
                                 "tensor or a tuple/list of tensors")
        call.first = outs
        differentiable = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor)
                          and o.requires_grad and (o.is_floating_point() or o.is_complex())]
        call.differentiable = len(differentiable)
        call.outputs = [k for k in differentiable if outs[k].numel()]
        call.empty += [f"output {k} {tuple(outs[k].shape)}" for k in differentiable
                       if not outs[k].numel()]
        call.float_outputs = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor)
                              and o.is_floating_point() and o.numel()]
        call.complex = any(args[i].is_complex() for i in grads) or any(
            isinstance(o, torch.Tensor) and o.is_complex() for o in outs)
        return call

    @property
    def nothing_to_compare(self) -> bool:
        """Every checked input or every differentiable output has zero elements."""
        return not self.checked or (self.differentiable > 0 and not self.outputs)

    def wrapped_outputs(self) -> list[torch.Tensor]:
        """The differentiable outputs at the given arguments (the first forward's: a backward
        from them must keep the graph, `retain_graph=True`)."""
        return [self.first[k] for k in self.outputs]

    def laid_end_to_end(self) -> torch.Tensor:
        """The differentiable outputs as `wrapped()` returns them, from the first forward."""
        return _end_to_end(self.wrapped_outputs())

    def tensors(self) -> list[torch.Tensor]:
        """The checked tensors: gradscope's copies, the leaves of the first forward's graph."""
        return list(self.leaves)

    def arguments(self, tensors: list[torch.Tensor]) -> list[Any]:
        """func's arguments with `tensors` at the checked positions, each in its original's
        layout (module doc)."""
        full = list(self.args)
        for pos, t in zip(self.checked, tensors, strict=True):
            full[pos] = in_layout(t, self.args[pos]) if pos in self._laid_out else t
        return full

    @cached_property
    def _laid_out(self) -> set[int]:
        return {pos for pos in self.checked if unusual_layout(self.args[pos])}

    @cached_property
    def single_use(self) -> bool:
        """The first forward's graph holds torch.compile'd code, which may donate its saved
        buffers to its one backward and then refuses `retain_graph`: each backward gradscope
        takes runs on a fresh forward's graph (`graph`), without retaining it. (Read once:
        every plumbing check asks.)"""
        return any(compiled_inside(self.first[k]) for k in self.outputs)

    def graph(self, outs: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
        """The differentiable outputs one backward runs through: `outs` (default: the first
        forward's), or a fresh forward's where that graph serves one backward only."""
        if not self.single_use:
            return self.wrapped_outputs() if outs is None else outs
        with torch.enable_grad():
            out = self.func(*self.arguments(self.leaves))
        fresh = [out] if self.single else list(out)
        return [fresh[k] for k in self.outputs]

    def random_vjp(self) -> tuple[torch.Tensor, torch.Tensor, tuple]:
        """(the outputs laid end to end, a seeded random upstream v, autograd's Jᵀv per
        checked tensor), from the first forward, once: the fast projection and the dtype
        check read the same backward."""
        if self._vjp is None:
            out = _end_to_end(self.graph())
            gen = torch.Generator().manual_seed(VJP_SEED)
            v = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)
            grads = torch.autograd.grad(out, self.tensors(), v,
                                        retain_graph=not self.single_use, allow_unused=True)
            self._vjp = (out, v, grads)
        return self._vjp

    def reads_originals(self) -> bool:
        """func reaches the checked tensors' own objects besides its arguments (a closure or
        global over them: `lambda _: model(x)` with the parameters passed): gradscope's
        evaluations, which pass copies, would not see that path — torch's gradcheck, which
        perturbs the objects themselves, does. The first forward's graph (taken at copies)
        searched for the originals."""
        originals = {id(self.args[i]) for i in self.checked}
        return any(id(getattr(node, "variable", None)) in originals
                   for out in self.wrapped_outputs() if out.grad_fn is not None
                   for node in grad_nodes(out.grad_fn))

    def wrapped(self, which: list[int] | None = None) -> Callable[..., torch.Tensor]:
        """func of the checked tensors alone, its outputs `which` (default: the
        differentiable ones) laid end to end (one output keeps its shape)."""
        picked = self.outputs if which is None else which

        def run(*tensors: torch.Tensor) -> torch.Tensor:
            out = self.func(*self.arguments(list(tensors)))
            outs = [out] if self.single else list(out)
            return _end_to_end([outs[k] for k in picked])

        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for n in self.names]
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__name__ = run.__qualname__ = label(self.func)
        run.__wrapped__ = self.func  # type: ignore[attr-defined]  (a torch.compile'd func shows)
        return run


def _end_to_end(chosen: list[torch.Tensor]) -> torch.Tensor:
    """One output as it is; several flattened and concatenated in their common dtype."""
    if len(chosen) == 1:
        return chosen[0]
    dtype = chosen[0].dtype
    for c in chosen[1:]:
        dtype = torch.promote_types(dtype, c.dtype)
    return torch.cat([c.reshape(-1).to(dtype) for c in chosen])


def unusual_layout(x: torch.Tensor) -> bool:
    """A strided tensor that is not the contiguous whole of its own storage."""
    if x.layout != torch.strided:
        return False
    whole = x.untyped_storage().nbytes() == x.numel() * x.element_size()
    return not (x.is_contiguous() and x.storage_offset() == 0 and whole)


def in_layout(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`t`'s values in `like`'s layout: a copy of like's whole storage with t written where
    like's elements live, viewed with like's sizes, strides and storage offset — differentiable
    in `t` (as_strided_scatter), so autograd flows back to gradscope's copy."""
    size = like.untyped_storage().nbytes() // like.element_size()
    storage = like.detach().as_strided((size,), (1,), 0).to(t.dtype).clone()
    placed = storage.as_strided_scatter(t, like.shape, like.stride(), like.storage_offset())
    return placed.as_strided(like.shape, like.stride(), like.storage_offset())


def label(func: Callable[..., Any]) -> str:
    """`MyFunction.apply`, `my_fn`, `Conv2d` — what the report calls the target."""
    owner = getattr(func, "__self__", None)
    if isinstance(owner, type):
        return f"{owner.__name__}.{getattr(func, '__name__', 'apply')}"
    if isinstance(func, torch.nn.Module):
        return type(func).__name__
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", "func")


def _names(func: Callable[..., Any], count: int, checked: list[int]) -> list[str]:
    """The checked inputs' names: the parameters of func where it has readable ones."""
    names: list[str] = []
    owner = getattr(func, "__self__", None)
    if getattr(func, "__name__", "") == "apply" and isinstance(owner, type) \
            and issubclass(owner, torch.autograd.Function):
        # `F.apply(*args)` names nothing: F.forward's parameters do — the names its culprit
        # line and a check of F use
        from gradscope.targets.oldstyle import forward_names

        params = forward_names(owner)
    else:
        try:
            params = [p.name for p in inspect.signature(func).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
    for i in checked:
        name = params[i] if i < len(params) else f"input{i}"
        name = name if name.isidentifier() and not name.startswith("_") else f"input{i}"
        names.append(name if name not in names else f"{name}{i}")
    return names
