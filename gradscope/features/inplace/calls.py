"""Every call of a custom `autograd.Function` in one forward and backward of the user's code:
what it was given (its arguments, as its forward received them), the gradient it received from
above and what its backward returned — the material for checking each Function in place
(culprits.py).

A first forward finds the Function classes in the graph; a second runs with each class's
`forward` (or `setup_context`) wrapped on the class itself, restored afterwards whatever
happens, to record the arguments of each call and the node it made (the ctx is the node);
hooks on those nodes record the gradients of one backward with the run's upstream. A subclass
that overrides only `backward` still runs its parent's forward and its own backward. The same
watched forward records every gradient hook registered on a tensor (a `TorchFunctionMode` sees
`Tensor.register_hook`), with what backward gave it and what it returned, and so do the hooks
the user's code registered before (on parameters, module backward hooks: targets/registered.py).
torch's own Functions (the identity a module backward hook hangs on) are torch's: the hook on
them is what is checked. A Function called inside `vmap` (`generate_vmap_rule`) runs as a class
torch generates for that call, over the batched tensors; its call is recorded where that class
receives them (`vmapped_calls`) and checked as the user's Function vmapped the same way."""

# Long: one recording — Function calls (plain, vmapped), dispatcher ops' calls and gradient
# hooks are seen in one watched forward and backward and kept in one order; split, the pieces
# would share the call list and its order through each other.

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradscope.features.inplace import unseen
from gradscope.features.inplace.custom_ops import CUSTOM_OPS
from gradscope.targets.oldstyle import has_setup_context, own_static, patched, values_only
from gradscope.targets.registered import WatchedHook, reporting
from gradscope.tensors import as_leaves, differing, grad_nodes, own_work
from gradscope.usercode import calling_site

MAX_CALLS = 64  # calls recorded in one forward (a loop over thousands of steps keeps the first)


@dataclass
class FunctionCall:
    """One call: the Function's class, its arguments, and (after backward) the gradients its
    outputs received and the ones its backward returned (one per argument, None where it
    returned none)."""

    cls: type
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    node: Any
    received: tuple[torch.Tensor | None, ...] = ()
    returned: tuple[torch.Tensor | None, ...] = ()
    order: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ran(self) -> bool:
        """Whether backward reached this call."""
        return bool(self.returned)


@dataclass
class HookCall:
    """One gradient hook registered on a tensor during the forward (`t.register_hook(fn)`):
    where, and (after backward) the gradient it was given and what it returned (None: it
    returned None, leaving the gradient as it was)."""

    hook: Any
    where: str
    received: torch.Tensor | None = None
    returned: torch.Tensor | None = None

    @property
    def name(self) -> str:
        return getattr(self.hook, "__qualname__", None) or type(self.hook).__name__


@dataclass
class Recorded:
    """What one watched forward and backward saw: custom Function calls and gradient hooks
    that backward reached."""

    calls: list[FunctionCall] = field(default_factory=list)
    hooks: list[HookCall] = field(default_factory=list)
    # in-place changes of a saved tensor that no version check sees (unseen.py)
    changed: tuple[unseen.Unseen, ...] = ()


class _Hooks(TorchFunctionMode):
    """Records each `Tensor.register_hook` of the forward, registering a wrapper that keeps
    what the hook was given and what it returned."""

    def __init__(self, hooks: list[HookCall] | None) -> None:
        super().__init__()
        self.hooks, self.seen = hooks, False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        if func is not torch.Tensor.register_hook or len(args) < 2:
            return func(*args, **kwargs)
        self.seen = True
        # (a WatchedHook reports its calls itself, with the line that first registered it)
        if self.hooks is None or len(self.hooks) >= MAX_CALLS \
                or isinstance(args[1], WatchedHook):
            return func(*args, **kwargs)
        tensor, hook = args[0], args[1]
        call = HookCall(hook, calling_site())
        self.hooks.append(call)

        def watched(grad: torch.Tensor) -> Any:
            out = hook(grad)
            call.received = grad.detach().clone()
            call.returned = out.detach().clone() if isinstance(out, torch.Tensor) else None
            return out

        return func(tensor, watched)


# namespaces of torch's own dispatcher ops, whose autograd formulas are torch's
TORCH_NAMESPACES = frozenset({"aten", "prim", "prims", "c10d", "_c10d_functional",
                              "c10d_functional", "profiler", "higher_order", "inductor"})


class _DispatcherOps(TorchFunctionMode):
    """Calls of dispatcher ops outside torch's namespaces whose autograd is not a Python
    Function (a C++ extension's op, its autograd kernel registered in C++: torchvision's
    roi_align): each call's arguments, and through a hook on its output the gradient it
    received. `calls` None: only whether there was one (`seen`). A torch.library custom op
    is not one of these: its generated Function is recorded as a Function (`functions`
    grows while it runs)."""

    def __init__(self, calls: list[FunctionCall] | None, functions: list[FunctionCall]
                 ) -> None:
        super().__init__()
        self.calls, self.functions, self.seen = calls, functions, False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        kwargs = kwargs or {}
        if own_work():  # (gradscope's copy of an input: no call of the user's)
            return func(*args, **kwargs)
        before = len(self.functions)
        out = func(*args, **kwargs)
        op = dispatcher_op(func)
        if op is None or kwargs or not isinstance(out, torch.Tensor) or not out.requires_grad \
                or len(self.functions) != before:
            return out
        self.seen = True
        if self.calls is not None and len(self.calls) < MAX_CALLS:
            call = FunctionCall(stand_in(func, op), tuple(_kept(a) for a in args), {}, None,
                                order=len(self.functions) + len(self.calls),
                                extra={"storage": tuple(storage(a) for a in args)})

            def received(grad: torch.Tensor) -> None:
                call.received = (grad.detach().clone(),)

            try:
                out.register_hook(received)
            except RuntimeError:  # (an output that takes no hook: the call is not checked)
                return out
            self.calls.append(call)
        return out


def dispatcher_op(func: Any) -> Any:
    """The op overload `func` is, where it is a dispatcher op outside torch's namespaces
    (else None)."""
    ops = torch._ops  # (the types of torch.ops' objects; no public alias on 2.13)
    if isinstance(func, ops.OpOverloadPacket):
        func = getattr(func, "default", None)
    if not isinstance(func, ops.OpOverload):
        return None
    return None if func.namespace in TORCH_NAMESPACES else func


_STAND_INS: dict[Any, type] = {}


def stand_in(func: Any, op: Any) -> type:
    """A Function-like class for a dispatcher op, so that its calls are checked in place as
    a Function's are: `apply` calls it as the code did (`func`: the op or its overload
    packet), `forward`'s signature names the schema's arguments, `dispatcher_op` says which
    op it is (custom_ops.registered)."""
    cls = _STAND_INS.get(func)
    if cls is None:
        names = [a.name for a in op._schema.arguments]

        def forward(*args: Any) -> Any:
            return func(*args[1:])

        forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            + [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
        cls = type(op._schema.name.replace("::", "."), (), {
            "apply": staticmethod(func), "forward": staticmethod(forward),
            "dispatcher_op": op, "__module__": "torch.ops"})
        _STAND_INS[func] = cls
    return cls


def _op_returned(call: FunctionCall) -> tuple[torch.Tensor | None, ...]:
    """What the op's autograd kernel returns for the gradient its call received, per
    argument (None for one that is not a floating tensor); () where it refuses."""
    return backward_again(call, lambda out: call.received[0]) or ()


def backward_again(call: FunctionCall, upstream: Callable[[torch.Tensor], torch.Tensor],
                   flat: Callable[[Any], torch.Tensor] | None = None
                   ) -> tuple[torch.Tensor | None, ...] | None:
    """What the call's backward returns per argument (None for one that is not a floating
    tensor) on a fresh call with the recorded arguments, for the gradient `upstream` makes
    of its output (`flat`: how the outputs are read as one tensor). None where the class
    refuses a second call or a backward."""
    leaves = [a.detach().clone().requires_grad_(True) if isinstance(a, torch.Tensor)
              and a.is_floating_point() else a for a in call.args]
    wanted = [k for k, a in enumerate(leaves) if isinstance(a, torch.Tensor) and a.requires_grad]
    try:
        with torch.enable_grad():
            out = applied(call.cls, leaves, call.kwargs)
            if flat is not None:
                out = flat(out)
            grads = torch.autograd.grad(out, [leaves[k] for k in wanted], upstream(out),
                                        allow_unused=True)
    except Exception:  # (a second call or a backward refused: not checked)
        return None
    found = dict(zip(wanted, grads, strict=True))
    return tuple(found.get(k) for k in range(len(leaves)))


def classes(output: torch.Tensor) -> list[type]:
    """The custom Function classes in the graph of `output`, in the order first met
    (torch's own among them: see `users`)."""
    found: list[type] = []
    for node in grad_nodes(output.grad_fn):
        cls = getattr(node, "_forward_cls", None)
        if isinstance(cls, type) and cls not in found:
            found.append(cls)
    return found


def users(found: list[type]) -> list[type]:
    """The classes the user's code defines: torch's own (the identity Function a module
    backward hook hangs on) are torch's, the hook on them is what is checked."""
    return [cls for cls in found if cls.__module__.partition(".")[0] != "torch"
            or cls.__module__ == CUSTOM_OPS]  # (a custom op's: the user's backward inside)


def record(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
           values: Mapping[str, torch.Tensor], upstream: torch.Tensor) -> Recorded:
    """The calls of custom Functions and the gradient hooks registered in one forward and
    backward of `forward` at `values` (all of them leaves that require grad), backward with
    `upstream`."""
    # (leaves share the values' storage: torch's own ops never write into their inputs, and
    # a model's parameters copied twice more would be two more copies of the model)
    leaves = as_leaves(values)
    with torch.enable_grad():
        with _DispatcherOps(None, []) as ops_seen, _Hooks(None) as looking, \
                unseen.Watch() as watch:
            first = forward(leaves)
            found = classes(first)
        changed = unseen.unseen(first, watch.changes)
        del first
        if not found and not looking.seen and not ops_seen.seen:  # (a module hook's
            return Recorded(changed=changed)  # identity Function is found)
        leaves = as_leaves(values)
        calls: list[FunctionCall] = []
        op_calls: list[FunctionCall] = []
        hooks: list[HookCall] = []
        # (the op recorder outside the hooks': the hook it puts on an op's output is its own,
        # and a mode's handler runs with the modes entered after it off)
        with wrapped(users(found), calls), vmapped_calls(found, calls), \
                _DispatcherOps(op_calls if ops_seen.seen else None, calls), _Hooks(hooks):
            out = forward(leaves)
        _sole_ways(out, calls, leaves)
        handles = [c.node.register_hook(_keeper(c)) for c in calls if c.node is not None]
        try:
            wanted = [v for v in leaves.values() if v.requires_grad]
            if out.requires_grad and wanted:
                with reporting(_reported(hooks)), returns_seen(calls):
                    torch.autograd.grad(out, wanted, upstream.to(out.dtype), allow_unused=True)
        finally:
            for h in handles:
                h.remove()
            for c in calls:  # (a node holds the whole graph behind it: the model's copy too)
                c.node = None
        for c in op_calls:
            if c.received:
                c.returned = _op_returned(c)
    every = sorted([*calls, *op_calls], key=lambda c: c.order)
    return Recorded([c for c in every if c.ran], [h for h in hooks if h.received is not None],
                    changed)


def _sole_ways(out: Any, calls: list[FunctionCall], leaves: Mapping[str, torch.Tensor]
               ) -> None:
    """Per call, the target's inputs passed to it as an argument (the leaf itself) whose only
    way into the output's graph is that call's node: `extra["sole"]`, argument index → input
    name. Such an input's gradient is that call's backward's answer alone (a parameter its
    forward reaches through a callable, passed beside it only so that backward can return its
    gradient)."""
    if not isinstance(out, torch.Tensor) or out.grad_fn is None or not calls:
        return
    with contextlib.suppress(Exception):  # (a tensor subclass without storage: none found)
        _find_sole_ways(out, calls, leaves)


def _find_sole_ways(out: torch.Tensor, calls: list[FunctionCall],
                    leaves: Mapping[str, torch.Tensor]) -> None:
    consumers: dict[int, int] = {}
    for node in grad_nodes(out.grad_fn):
        for child, _ in node.next_functions:
            if child is not None:
                consumers[id(child)] = consumers.get(id(child), 0) + 1
    # (a leaf's node holds the tensor the gradient accumulates into: a module's parameter
    # slot holds the input's leaf, or a tensor on its storage)
    names: dict[Any, str | None] = {}
    for n, t in leaves.items():
        if t.numel():  # (two inputs on one place: neither is told apart)
            names[_where(t)] = n if _where(t) not in names else None
    for c in calls:
        if c.node is None:
            continue
        tensors = [i for i, a in enumerate(c.args) if isinstance(a, torch.Tensor)]
        for i, (child, _) in zip(tensors, c.node.next_functions, strict=False):
            leaf = getattr(child, "variable", None)
            name = names.get(_where(leaf)) if isinstance(leaf, torch.Tensor) else None
            if name is not None and consumers.get(id(child)) == 1:
                c.extra.setdefault("sole", {})[i] = name


def _where(t: torch.Tensor) -> tuple[int, tuple[int, ...], torch.dtype]:
    return t.data_ptr(), tuple(t.shape), t.dtype


# where torch generates the class that runs a Function inside vmap (generate_vmap_rule)
VMAPPED_MODULE = "torch._functorch.autograd_function"


@contextmanager
def vmapped_calls(found: list[type], calls: list[FunctionCall]) -> Iterator[None]:
    """While inside, each call of a user's Function inside `vmap` is recorded into `calls`:
    torch runs it as a class generated for the call (`found` has one from the first forward),
    whose `setup_context` receives the batched tensors as plain ones, and its ctx is the
    call's node. A profile function of this thread sees that call (its arguments); the class
    says which Function it vmaps and how (`_vmapping`). Where a profile function is set
    already (the user profiles), nothing is recorded."""
    if not any(cls.__module__ == VMAPPED_MODULE for cls in found) \
            or sys.getprofile() is not None:
        yield
        return

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name != "setup_context" \
                or frame.f_globals.get("__name__") != VMAPPED_MODULE or len(calls) >= MAX_CALLS:
            return
        ctx, inputs = frame.f_locals.get("ctx"), frame.f_locals.get("inputs")
        # (the outermost level only: its ctx is the call's node, its inputs plain tensors; a
        # nested vmap's inner levels get a wrapper of it and batched tensors)
        if not isinstance(ctx, torch.autograd.function.BackwardCFunction) \
                or not isinstance(inputs, tuple | list):
            return
        try:
            vmapping = _vmapping(getattr(ctx, "_forward_cls", None))
            if vmapping is not None:
                call = FunctionCall(vmapped(*vmapping), tuple(_kept(a) for a in inputs), {},
                                    ctx, order=len(calls),
                                    extra={"storage": tuple(storage(a) for a in inputs)})
                calls.append(call)
        except Exception:  # (never the user's code's failure: this call is not recorded)
            return

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


def _vmapping(generated: Any) -> tuple[type, tuple[tuple[Any, str], ...]] | None:
    """(the user's Function, (in_dims, randomness) of each vmap it runs inside, the outermost
    first) of a class torch generated to run it inside vmap — nested vmaps generate a class
    for the class of the level inside — read from what each `forward` closes over; None for
    any other class, or a Function that is torch's own."""
    levels: list[tuple[Any, str]] = []
    while isinstance(generated, type) and generated.__module__ == VMAPPED_MODULE:
        try:
            bound = inspect.getclosurevars(generated.forward).nonlocals
        except (TypeError, ValueError):
            return None
        if "in_dims" not in bound:
            return None
        levels.append((bound["in_dims"], str(bound.get("randomness", "error"))))
        generated = bound.get("autograd_function")
    if not levels or not isinstance(generated, type) or not users([generated]):
        return None
    return generated, tuple(levels)


_VMAPPED: dict[tuple[Any, ...], type] = {}


def vmapped(user: type, levels: tuple[tuple[Any, str], ...]) -> type:
    """The user's Function as its call inside vmap ran: `apply` takes the batched tensors
    and vmaps the Function over them (each level's in_dims, the outermost first), so that
    its backward is the one torch generated from the user's; the class is the user's
    otherwise (its name, signature and backward's line: the culprit is the user's
    backward)."""
    key = (user, repr(levels))
    cls = _VMAPPED.get(key)
    if cls is None:
        apply = user.apply  # type: ignore[attr-defined]
        for in_dims, randomness in reversed(levels):
            apply = torch.vmap(apply, in_dims=in_dims, randomness=randomness)
        cls = type(user.__name__, (user,), {"apply": staticmethod(apply), "vmapped": user,
                                           "__module__": user.__module__,
                                           "__qualname__": user.__qualname__})
        _VMAPPED[key] = cls
    return cls


def backward_of(cls: type) -> Any:
    """The class's backward as written (@once_differentiable and other wrappers unwrapped)."""
    backward = getattr(cls, "backward", None)
    return inspect.unwrap(backward) if backward is not None else None


@contextmanager
def returns_seen(calls: list[FunctionCall]) -> Iterator[None]:
    """While inside, each call's backward notes the line it returned from
    (`extra["returned_at"]`): which `return` of a backward with several gave a wrong gradient.
    A profile function of this thread sees each return; where one is set already (the user
    profiles), nothing is noted."""
    codes = {getattr(backward_of(c.cls), "__code__", None) for c in calls}
    codes.discard(None)
    if not codes or sys.getprofile() is not None:
        yield
        return

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code in codes:
            ctx = frame.f_locals.get("ctx")
            for call in calls:
                if call.node is ctx and ctx is not None:
                    call.extra["returned_at"] = frame.f_lineno

    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(None)


def _reported(hooks: list[HookCall]) -> Callable[..., None]:
    """Where a WatchedHook's calls go: one HookCall per gradient tensor it was given."""
    def report(watched: WatchedHook, pairs: list[tuple[Any, Any]]) -> None:
        for given, out in pairs:
            if isinstance(given, torch.Tensor) and len(hooks) < MAX_CALLS:
                hooks.append(HookCall(watched.hook, watched.where, given.detach().clone(),
                                      out.detach().clone() if isinstance(out, torch.Tensor)
                                      else None))
    return report


def _keeper(call: FunctionCall) -> Callable[..., None]:
    def hook(grad_inputs: tuple[Any, ...], grad_outputs: tuple[Any, ...]) -> None:
        call.returned = tuple(g.detach().clone() if g is not None else None
                              for g in grad_inputs)
        call.received = tuple(g.detach().clone() if g is not None else None
                              for g in grad_outputs)
    return hook


@contextmanager
def wrapped(found: list[type], calls: list[FunctionCall],
            keep: Callable[[Any], Any] | None = None) -> Iterator[None]:
    """Each class records its calls into `calls` while inside: its `forward` (old style: ctx
    first) or its `setup_context` (functorch style) is wrapped on the class, since code keeps
    `apply` bound long before (`relu = MyReLU.apply`) and a bound `apply` still looks those two
    up on the class at every call. The ctx either receives is the call's autograd node.
    `keep`: how an argument is kept (a detached copy; the tensor itself, its graph with it,
    where the graph is what is wanted: reach.py)."""
    changes = []
    for cls in found:  # (every original looked up before anything is patched)
        name = "setup_context" if has_setup_context(cls) else "forward"
        changes.append((cls, name, staticmethod(_recording(own_static(cls, name), name,
                                                           calls, keep or _kept))))
    with patched(changes):
        yield


def _recording(original: Callable[..., Any], name: str, calls: list[FunctionCall],
               keep: Callable[[Any], Any]) -> Callable[..., Any]:
    """`forward(ctx, *args)` or `setup_context(ctx, inputs, output)` that records the call
    (once per ctx: a subclass's forward may call its parent's) and runs the original. A
    custom op's call also records which tensor arguments its forward wrote into
    (`extra["written"]`: their positions), whatever its schema declares."""

    def run(ctx: Any, *rest: Any) -> Any:
        args = rest if name == "forward" else tuple(rest[0])
        call = None
        if len(calls) < MAX_CALLS and not any(c.node is ctx for c in calls):
            cls = getattr(ctx, "_forward_cls", None)
            if isinstance(cls, type):
                call = FunctionCall(cls, tuple(keep(a) for a in args), {}, ctx,
                                    order=len(calls),
                                    extra={"storage": tuple(storage(a) for a in args)})
                calls.append(call)
        out = original(ctx, *rest)
        if call is not None and name == "forward" and call.cls.__module__ == CUSTOM_OPS:
            call.extra["written"] = tuple(
                i for i, (a, kept) in enumerate(zip(args, call.args, strict=True))
                if isinstance(a, torch.Tensor) and a is not kept
                and differing(kept, a.detach())[0].numel())
        return out

    return run


def storage(value: Any) -> tuple[Any, ...] | None:
    """Where a tensor's values live (its storage, shape, dtype and device), so that a call's
    argument can be told for one of the target's own tensors after it was copied."""
    if not isinstance(value, torch.Tensor):
        return None
    return value.data_ptr(), tuple(value.shape), value.dtype, value.device


def applied(cls: Any, args: Any, kwargs: Any) -> Any:
    """`cls.apply` on copies of its tensor arguments (differentiable: a gradient still reaches
    a leaf passed in): the user's Function may write into what it is given or free its memory
    until its backward restores it (a reversible network's input), and the arguments are
    gradscope's recorded values, asked again and again."""
    return cls.apply(*(a.clone() if isinstance(a, torch.Tensor) else a for a in args),
                     **kwargs)


def applied_values(cls: Any, args: Any, kwargs: Any) -> Any:
    """`applied`, for values only (no graph is kept). torch.func refuses a Function without
    setup_context; under vmap (finite differences batching their points) its forward's
    values are computed with a stand-in ctx instead (oldstyle.py): one batched call, not one
    call per element. A plain call is never patched, and the batcher holds a batch to a plain
    call before it trusts it."""
    try:
        return applied(cls, args, kwargs)
    except RuntimeError as exc:
        if has_setup_context(cls) or "setup_context" not in str(exc):
            raise
        with values_only([cls]):
            return applied(cls, args, kwargs)


def joined(out: Any) -> torch.Tensor:
    """The call's floating outputs as one tensor: the output itself when it is the only one
    (its shape kept, so that an elementwise Function is found elementwise and differenced
    all at once), else flattened and joined."""
    parts = out if isinstance(out, tuple | list) else (out,)
    floats = [p.double() for p in parts if isinstance(p, torch.Tensor) and p.is_floating_point()]
    if len(floats) == 1:
        return floats[0]
    return torch.cat([f.reshape(-1) for f in floats]) if floats else torch.zeros(
        0, dtype=torch.float64)


def received_upstream(call: FunctionCall, out: torch.Tensor) -> torch.Tensor:
    """The gradients the call's outputs received, flattened like its outputs: an output none
    reached contributes zeros of its own size (so a Function used through its second output
    is checked with the second output's gradient, where it belongs)."""
    parts = [g.double().reshape(-1) if g is not None else None for g in call.received]
    if all(p is not None for p in parts) and sum(p.numel() for p in parts) == out.numel():
        return torch.cat(parts).reshape(out.shape)  # type: ignore[arg-type]
    sizes = _output_sizes(call)
    if sizes is not None and len(sizes) == len(parts):
        pieces = [p if p is not None else torch.zeros(n, dtype=torch.float64,
                                                      device=out.device)
                  for (n, floating), p in zip(sizes, parts, strict=True) if floating]
        if sum(p.numel() for p in pieces) == out.numel():
            return torch.cat(pieces).reshape(out.shape)
    v = torch.zeros(out.numel(), dtype=out.dtype, device=out.device)
    start = 0  # (sizes unknown: the gradients that arrived, in order)
    for p in parts:
        if p is not None and start + p.numel() <= out.numel():
            v[start:start + p.numel()] = p
            start += p.numel()
    return v.reshape(out.shape)


def _output_sizes(call: FunctionCall) -> list[tuple[int, bool]] | None:
    """Each tensor output of the call's forward: its size, and whether it is floating (only
    those are differenced); None where the forward refuses a second call."""
    try:
        with torch.no_grad():
            out = applied(call.cls, call.args, call.kwargs)
    except Exception:  # (a forward that refuses: the gradients that arrived, in order)
        return None
    parts = out if isinstance(out, tuple | list) else (out,)
    return [(p.numel(), p.is_floating_point()) for p in parts if isinstance(p, torch.Tensor)]


def _kept(value: Any) -> Any:
    """An argument as the call received it, detached from the graph (a tensor's value)."""
    return value.detach().clone() if isinstance(value, torch.Tensor) else value
