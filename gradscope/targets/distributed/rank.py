"""One rank's part of a distributed check, in the rank's own process (world.py joined it to
the others): the target built from FILE.py and its inputs bound as a single-process check binds
them (the same seed on every rank: the same drawn values), then rank 0's evaluations answered
one at a time, each an ordinary call of the user's own objects in grad mode — a module's
parameters written into it in place, backward through `y.backward(upstream)`, gradients read
from `.grad` — so that DDP's and FSDP's hooks and every collective run exactly as in training.
Every rank receives the same sequence of evaluations, so the target's collectives match.
Values arrive and leave on the CPU; a rank on a GPU (nccl) computes on its own device."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.options import Options
from gradscope.targets.code import CodeTarget
from gradscope.targets.distributed.declared import (
    local,
    parts_held,
    reduced,
    resharded,
    said_of,
    unsynced,
    wrapper_of,
)
from gradscope.targets.oldstyle import forward_names
from gradscope.targets.outputs import picked
from gradscope.usercode import backward_location, contained, user_code


@dataclass(frozen=True)
class RankSpec:
    """What every rank is told: the target as the user named it, the options, the world."""

    target: str
    base: str | None
    options: Options
    world: int
    timeout: float  # seconds a collective may wait for the other ranks


@dataclass(frozen=True)
class Described:
    """What a rank built: its inputs' values (parameters apart) and how each was made, and
    what its code says about each tensor (sharded or replicated, and why)."""

    names: tuple[str, ...]
    parameters: tuple[str, ...]
    values: dict[str, torch.Tensor]
    origins: dict[str, str]
    said: dict[str, str]  # name → "sharded: …" / "replicated: …" where the code says so
    kind: str
    wrapper: str  # "DistributedDataParallel" / "FullyShardedDataParallel" / ""
    empty: tuple[str, ...] = ()  # DTensor shards with no elements on this rank (not inputs)
    parts: dict[str, tuple] = field(default_factory=dict)  # the DTensor parts it holds


@dataclass(frozen=True)
class CallSeen:
    """One custom Function call a rank recorded: its class, its backward's `def`, its
    arguments (tensors; None for others), the gradients its outputs received and those its
    backward returned."""

    name: str
    where: str
    args: tuple[torch.Tensor | None, ...]
    received: tuple[torch.Tensor | None, ...]
    returned: tuple[torch.Tensor | None, ...]
    arguments: tuple[str, ...] = ()  # forward's parameter names, as a culprit line says them


class Server:
    """A rank's side of the check: its commands answered — `build` makes the target as one
    process would (under the check's seed, so that every rank draws the same values), the
    evaluations go to it, `release` lets it go."""

    def __init__(self, device: str = "cpu") -> None:
        self.served: Served | None = None
        self.device = device

    def handle(self, command: tuple) -> Any:
        from gradscope.rng import seeded

        with contained("the distributed call"):
            if command[0] == "build":
                spec: RankSpec = command[1]
                self.served = None
                with seeded(spec.options.seed):
                    self.served = Served.build(spec, self.device)
                return self.served.described()
            if command[0] == "release":
                self.served = None
                return None
            if self.served is None:
                raise UsageError(f"the rank was asked {command[0]!r} before it built a target")
            return self.served.answer(command)


class Served:
    """The target as built on this rank, and its evaluations."""

    def __init__(self, target: Any, bound: Any, device: str = "cpu") -> None:
        self.target, self.bound = target, bound
        self.device = torch.device(device)
        self.said: dict[str, str] = {}
        self.calls: list[Any] = []  # the last recorded custom Function calls
        self.context: Callable[[], Any] = nullcontext  # --context: around forward and backward
        self.after: Callable[[], Any] | None = None  # --after-backward: completes the grads
        self.empty: tuple[str, ...] = ()  # shards with no elements on this rank
        self.parts: dict[str, tuple] = {}  # which part of each DTensor this rank holds

    @classmethod
    def build(cls, spec: RankSpec, device: str = "cpu") -> Served:
        from gradscope.inputs.bind import DTYPES, bind, device_of
        from gradscope.targets import resolve

        options = spec.options.updated(device=device)  # (a GPU rank: its own GPU)
        target = resolve(spec.target, args=options.arg, init=options.init,
                         imports=options.imports,
                         base=Path(spec.base) if spec.base else None)
        target.convert(DTYPES[options.dtype], device_of(options.device))
        target.set_mode(options.mode)
        if options.output_index is not None or options.output_key is not None:
            target.pick_output(options.output_index if options.output_index is not None
                               else options.output_key)
        said = said_of(_module(target), target.parameters)
        parts = parts_held(_module(target), target.parameters)
        empty: tuple[str, ...] = ()
        if target.parameters:  # a DTensor's values are its local part (sharing its storage)
            locals_ = {n: local(t) for n, t in target.parameters.items()}
            # (a shard with no elements on this rank: an uneven split's last ranks)
            empty = tuple(n for n, t in locals_.items() if not t.numel() and n in said)
            target.parameters = {n: t for n, t in locals_.items() if n not in empty}
        served = cls(target, _own_draws(options, target, bind(options, target)), device)
        served.said, served.empty, served.parts = said, empty, parts
        served.context = _context(target, options.context)
        served.after = _after(target, options.after_backward)
        return served

    def described(self) -> Described:
        target, bound = self.target, self.bound
        module = _module(target)
        return Described(
            names=tuple(bound.cast), parameters=tuple(n for n in bound.cast
                                                      if n in target.parameters),
            values={n: settled(t) for n, t in bound.cast.items()},
            origins={n: v.said for n, v in bound.values.items()},
            said=self.said, kind=target.kind, wrapper=wrapper_of(module), empty=self.empty,
            parts=self.parts)

    def answer(self, command: tuple) -> Any:
        with user_code("--context"), self.context():
            return self._answer(command)

    def _answer(self, command: tuple) -> Any:
        kind, values = command[0], self._here(command[1])
        if kind == "value":
            with torch.enable_grad():
                return settled(self._call(values)[1])
        if kind == "grad":
            return self._grad(values, command[2].to(self.device))
        if kind == "record":
            return self._record(values, command[2].to(self.device), command[3])
        if kind == "probe":
            return self._probe(*command[1:])
        raise ValueError(f"unknown command {kind!r}")

    def _here(self, values: Any) -> Any:
        """Values from rank 0 (on the CPU) on this rank's device."""
        if not isinstance(values, Mapping) or self.device.type == "cpu":
            return values
        return {n: v.to(self.device) for n, v in values.items()}

    def _record(self, values: Mapping[str, torch.Tensor], upstream: torch.Tensor,
                recorder: Callable[..., Any]) -> list[CallSeen]:
        """The custom Function calls of one forward and backward, as `recorder` (the analysis
        that asks: it records them) sees them; kept for `_probe`."""
        def forward(leaves: Mapping[str, torch.Tensor]) -> torch.Tensor:
            return self._call(leaves, fresh=False)[1]

        with unsynced(_module(self.target)):
            self.calls = list(recorder(forward, values, upstream).calls)
        return [CallSeen(c.cls.__qualname__, backward_location(c.cls),
                         tuple(settled(a) if isinstance(a, torch.Tensor) else None
                               for a in c.args),
                         tuple(None if g is None else settled(g) for g in c.received),
                         tuple(None if g is None else settled(g) for g in c.returned),
                         tuple(forward_names(c.cls)))
                for c in self.calls]

    def _probe(self, index: int, argument: int, direction: torch.Tensor, step: float
               ) -> tuple[torch.Tensor | None, ...]:
        """Call `index`'s own forward again with its argument moved by step × direction (every
        rank at once, so a collective inside it matches): its outputs."""
        call = self.calls[index]
        # (copies: the Function may write into its arguments or free them)
        args = [a.clone() if isinstance(a, torch.Tensor) else a for a in call.args]
        args[argument] = args[argument] + step * direction.to(args[argument])
        with torch.no_grad(), user_code(f"{call.cls.__qualname__}.forward"):
            out = call.cls.apply(*args, **call.kwargs)
        outs = out if isinstance(out, tuple | list) else (out,)
        return tuple(settled(o) if isinstance(o, torch.Tensor) else None for o in outs)

    def _call(self, values: Mapping[str, torch.Tensor], fresh: bool = True
              ) -> tuple[dict, torch.Tensor]:
        """One ordinary call at `values`: inputs as leaves that require grad (`fresh`; else
        `values` are those leaves), the parameters of the module the target is or reaches
        (a function's, held beside it) overwritten in place — DDP's hooks sit on them, and a
        DTensor parameter stays a DTensor — .grad cleared."""
        target = self.target
        module = _module(target)
        own = module is not None
        leaves = {n: v.detach().clone().requires_grad_(v.is_floating_point()) if fresh else v
                  for n, v in values.items() if not (own and n in target.parameters)}
        if own:
            resharded(module)
            with torch.no_grad():
                for name, tensor in target.parameters.items():
                    tensor.copy_(values[name])
            for p in module.parameters():
                p.grad = None
            args, kwargs = target._call_args(leaves)
            with user_code("forward"):
                out = module(*args, **kwargs)
            out = picked(out, target.text, target.output)
        else:
            out = target.forward(leaves)
        if type(out).__name__ == "DTensor":  # the whole output, differentiably (all-gathered)
            with user_code("forward"):
                out = out.full_tensor()
        return leaves, out

    def _grad(self, values: Mapping[str, torch.Tensor], upstream: torch.Tensor
              ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """`y.backward(upstream)` after a fresh call, and every input's `.grad` (a module's
        after its own backward hooks: DDP's all-reduce, FSDP's reduce-scatter)."""
        with torch.enable_grad():
            leaves, out = self._call(values)
            with user_code("backward"):
                out.backward(upstream.to(out.dtype))
            if self.after is not None:
                with user_code("--after-backward"):
                    self.after()
        grads = {}
        params = dict(_own_parameters(self.target))
        for name in values:
            source = params.get(name, leaves.get(name))
            grad = None if source is None else source.grad
            grads[name] = settled(torch.zeros_like(values[name]) if grad is None else
                                  reduced(grad, source))
        return settled(out), grads


def _own_draws(options: Options, target: Any, bound: Any) -> Any:
    """The binding with each input that is every rank's own part (--sharded) drawn anew on
    every rank but 0 (its own seed): parts alike on every rank would pass for one replicated
    output where they are pieces of the whole. Values the user gave stay as given."""
    import fnmatch
    from dataclasses import replace

    import torch.distributed as dist

    from gradscope.inputs.bind import bind
    from gradscope.rng import seed_for

    rank = dist.get_rank() if dist.is_initialized() else 0
    own = [n for n, v in bound.values.items() if v.chosen and n not in target.parameters
           and any(fnmatch.fnmatchcase(n, p) for p in options.sharded)]
    if not rank or not own:
        return bound
    again = bind(options.updated(seed=seed_for(options.seed, f":rank{rank}") % (1 << 31)),
                 target)
    values = {**bound.values, **{n: again.values[n].noted(f"rank {rank}'s own draw")
                                 for n in own}}
    cast = {**bound.cast, **{n: again.cast[n] for n in own}}
    return replace(bound, values=values, cast=cast)


def settled(t: torch.Tensor) -> torch.Tensor:
    """A tensor's values, computed, on the CPU (what travels to rank 0): a functional
    collective's result (DTensor's) is a promise until an op reads it, and a copy is such an
    op."""
    t = t.detach()
    return t.clone() if t.device.type == "cpu" else t.cpu()


def _module(target: Any) -> torch.nn.Module | None:
    """The module the user's code holds (a module target's, a function's model), or None."""
    return target.module if isinstance(target, CodeTarget) else None


def _named(target: Any, name: str, flag: str) -> Any:
    """NAME as the target's own module (FILE.py) defines or imports it."""
    owner = target.obj if isinstance(target, CodeTarget) else None
    module = sys.modules.get(getattr(owner, "__module__", None) or type(owner).__module__)
    found = getattr(module, name, None) if module is not None else None
    if found is None:
        raise UsageError(f"{flag} {name}: the target's file has no `{name}` (define or "
                         "import it there)")
    return found


def _context(target: Any, name: str | None) -> Callable[[], Any]:
    """--context NAME: the context manager NAME (called anew for each evaluation: a
    generator-based one serves once)."""
    if not name:
        return nullcontext
    found = _named(target, name, "--context")
    if hasattr(found, "__enter__") and hasattr(found, "__exit__"):
        return lambda: found
    if not callable(found):
        raise UsageError(f"--context {name}: `{name}` is not a context manager")
    return found


def _after(target: Any, name: str | None) -> Callable[[], Any] | None:
    """--after-backward NAME: the function NAME, called with the module where the target
    is one (whose .grad it completes), else with nothing."""
    if not name:
        return None
    found = _named(target, name, "--after-backward")
    if not callable(found):
        raise UsageError(f"--after-backward {name}: `{name}` is not a function")
    module = _module(target)
    if module is not None and type(module).__name__ != "Holder":
        return lambda: found(module)
    return found


def _own_parameters(target: Any) -> dict[str, torch.Tensor]:
    """The module's own Parameter objects by the names gradscope checks them under."""
    module = _module(target)
    if module is None:
        return {}
    named = dict(module.named_parameters(remove_duplicate=False))
    return {n: named[n] for n in target.parameters if n in named}


