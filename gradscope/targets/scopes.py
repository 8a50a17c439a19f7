"""Which module of a model each op of one forward ran in, and where NaN or infinity first
appeared in that forward: the model-scale half of the gradient-flow analysis.

One forward is watched by module hooks (the stack of module paths, as `named_modules()` names
them) and a `TorchFunctionMode` (every torch op's result, and the side each element took of
every comparison, clamp, relu, abs or sign on a tensor that depends on the inputs). Each new
autograd node is mapped to the innermost module running when it was made; a node no torch
function made (a custom `autograd.Function`'s) is mapped when the innermost module around it
returns. The first op
whose output is non-finite while its inputs are finite is where a NaN was born. Nothing is
changed: the hooks are removed and the mode left when the forward returns."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradscope.targets.base import BranchSite, Sourced
from gradscope.targets.branches import COMPARISONS, SIDES, sides
from gradscope.tensors import all_finite, grad_nodes, own_work, readable
from gradscope.usercode import OURS, place

MAX_ORIGINS = 5  # forward NaN origins kept: the first is where it starts, the rest follow it
MAX_SITES = 32  # branch sites recorded in one forward
BRANCHING = set(SIDES) | COMPARISONS


@dataclass
class Watched:
    """What one watched forward saw."""

    modules: dict[int, str] = field(default_factory=dict)  # id(grad_fn) → module path
    # (op, module path, user line, leaf names below, count): ops that made NaN/inf from finite
    origins: list[tuple[str, str, str, tuple[str, ...], int]] = field(default_factory=list)
    keep: list[Any] = field(default_factory=list)  # the grad_fns, so that their ids stay theirs
    entered: list[str] = field(default_factory=list)  # module paths, in the order first run
    # (user line, op) → side label → elements: branches on the inputs' values
    branches: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in a result (a tensor, or tuples, lists and dicts of them)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


class _Watch(TorchFunctionMode):
    def __init__(self, seen: Watched, stack: list[str], leaves: Mapping[int, str]) -> None:
        super().__init__()
        self.seen, self.stack, self.leaves = seen, stack, leaves

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if own_work():  # (gradscope's copy of an input: not the user's op)
            return out
        scope = self.stack[-1]
        for t in _tensors(out):
            # a custom Function's node below it, made in this scope and consumed here
            _claim(self.seen, t.grad_fn, scope)
        try:
            if len(self.seen.origins) < MAX_ORIGINS:
                self._nan(func, args, kwargs, out, scope)
            self._branch(func, args, kwargs or {}, out)
        except RuntimeError:  # inside vmap a batched tensor has no single value to read:
            pass  # this op goes unwatched, the user's code runs on
        return out

    def _branch(self, func: Callable[..., Any], args: Any, kwargs: Any, out: Any) -> None:
        """A comparison, clamp, relu, abs or sign on a tensor that depends on the inputs:
        which side each element took, summed over the calls from one line."""
        first = args[0] if args else None
        if not isinstance(first, torch.Tensor) or not first.requires_grad \
                or not all(readable(t) for t in _tensors((args, kwargs, out))):
            return
        name = getattr(func, "__name__", "")
        if name not in BRANCHING:
            return
        taken = sides(name, tuple(args), dict(kwargs), out)
        key = (self._line(), name.strip("_"))
        if not taken or (key not in self.seen.branches and len(self.seen.branches) >= MAX_SITES):
            return
        counts = self.seen.branches.setdefault(key, {})
        for label, n in taken:
            counts[label] = counts.get(label, 0) + n

    def _nan(self, func: Callable[..., Any], args: Any, kwargs: Any, out: Any,
             scope: str) -> None:
        made = [t for t in _tensors(out) if t.is_floating_point() and readable(t)
                and not all_finite(t)]
        if not made or not all(readable(t) and all_finite(t)
                               for t in _tensors((args, kwargs or {}))):
            return
        name = getattr(func, "__name__", str(func)).strip("_")
        count = sum(int((~torch.isfinite(t)).sum()) for t in made)
        self.seen.origins.append((name, scope, self._line(), self._below(made), count))

    @staticmethod
    def _line() -> str:
        for frame in reversed(traceback.extract_stack()):
            if not frame.filename.startswith(OURS):
                return f"{place(frame.filename, frame.lineno or 0)}: " \
                       f"{(frame.line or '').strip()}"
        return ""

    def _below(self, made: list[torch.Tensor]) -> tuple[str, ...]:
        found = {self.leaves[id(node.variable)] for t in made
                 for node in grad_nodes(t.grad_fn) if id(getattr(node, "variable", None))
                 in self.leaves}
        return tuple(sorted(found))


def _claim(seen: Watched, root: Any, scope: str) -> None:
    """Map `root` and the nodes below it that nothing mapped yet (no torch function made
    them: a custom Function's) to `scope`; a mapped node ends the walk."""
    todo = [root]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen.modules or hasattr(node, "variable"):
            continue
        seen.modules[id(node)] = scope
        seen.keep.append(node)
        todo.extend(child for child, _ in node.next_functions)


def _hooks(root: torch.nn.Module, seen: Watched, stack: list[str]) -> list[Any]:
    handles = []
    for name, module in root.named_modules():
        def enter(_module: Any, args: Any, name: str = name) -> None:
            for t in _tensors(args):  # made by the caller: the caller's
                _claim(seen, t.grad_fn, stack[-1])
            stack.append(name)
            if name not in seen.entered:
                seen.entered.append(name)

        def leave(_module: Any, _args: Any, out: Any, name: str = name) -> None:
            for t in _tensors(out):  # made inside and returned: this module's
                _claim(seen, t.grad_fn, name)
            if len(stack) > 1:
                stack.pop()

        try:
            first = module.register_forward_pre_hook(enter)
        except RuntimeError:  # a ScriptModule takes no hooks: its ops go to its caller
            continue
        handles += [first, module.register_forward_hook(leave, always_call=True)]
    return handles


@contextmanager
def watching(root: torch.nn.Module | None, leaves: Mapping[str, torch.Tensor]
             ) -> Iterator[Watched]:
    """Watch the forward run inside: module paths of `root`'s submodules (none when root is
    None: only the NaN origins), the leaves named as in `leaves`."""
    seen, stack = Watched(), [""]
    handles = _hooks(root, seen, stack) if root is not None else []
    names = {id(t): n for n, t in leaves.items()}
    try:
        with _Watch(seen, stack, names):
            yield seen
    finally:
        for handle in handles:
            handle.remove()


def sourced(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
            module: torch.nn.Module | None) -> Callable[[Mapping[str, torch.Tensor]], Sourced]:
    """The forward for the gradient-flow analysis of user code: file:line comes from anomaly
    mode, module paths (of `module`'s submodules) and forward NaN origins from watching it."""
    def watched(values: Mapping[str, torch.Tensor]) -> Sourced:
        with watching(module, values) as seen:
            out = forward(values)
        born = [(op, line, inputs, count, where or None)
                for op, where, line, inputs, count in seen.origins]
        branches = [BranchSite(line, op, tuple(counts.items()))
                    for (line, op), counts in seen.branches.items()]
        if module is None:
            return Sourced(out, {}, born, keep=seen.keep, branches=branches)
        return Sourced(out, {}, born, seen.modules, seen.keep, seen.entered, branches)
    return watched
