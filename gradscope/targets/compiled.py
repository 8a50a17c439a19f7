"""--compile BACKEND: the run mode that runs the target as `torch.compile(target,
backend=BACKEND)` makes it, beside the eager run every other engine reads.

The wrapper (`CompiledRun`) leaves every evaluation of the check eager and answers, by itself,
the views' questions (`alongside`): the compiled callable is called in one mode only — grad
mode, every input a leaf that requires grad, the check's dtype, the same values — once per
question a view puts (the table's upstream, each seeded random upstream, the Jacobian's rows),
each call's output taking one backward (a compiled backward that donates its buffers refuses
`retain_graph`). dynamo compiles on the first call and finds its cache on the others.
gradscope's own evaluations (finite differences, probes) call the eager target: one check
never makes dynamo compile the target in a second mode, recompile it, or hit its recompile
limit and run it eagerly without a word. What dynamo did is counted by a backend that wraps the
one asked for: the graphs it compiled, the graph breaks (dynamo's reasons), compiles beyond one
per graph (recompiles), and whether the call ran eagerly after all — then nothing compiled was
compared, and the run is inconclusive (features/compiled.py) unless the user accepts the
fallback (--compile-fallback)."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.options import Options
from gradscope.targets.base import Target
from gradscope.targets.mode import Mode
from gradscope.targets.wrapper import Wrapper
from gradscope.usercode import user_code

# the backends --compile names (any other registered one is accepted too: `list_backends`)
BACKENDS = ("eager", "aot_eager", "inductor")
# a Jacobian view is answered row by row (a compiled call each) up to this many output elements
MAX_ROWS = 256


@dataclass(frozen=True)
class CompileStats:
    """What dynamo did on gradscope's call of the compiled target."""

    backend: str
    graphs: int  # graphs handed to the backend
    graph_breaks: int
    breaks: tuple[str, ...]  # dynamo's reason for each break (its first line)
    recompiles: int  # graphs compiled beyond one per graph break + 1
    fell_back: bool  # nothing was compiled: the call ran eagerly
    calls: int  # calls of the compiled target (one per question; all hit dynamo's cache)
    seconds: float  # compiling and the first call, backward included

    def to_dict(self) -> dict[str, Any]:
        return {"backend": self.backend, "graphs": self.graphs,
                "graph_breaks": self.graph_breaks, "break_reasons": list(self.breaks),
                "recompiles": self.recompiles, "fell_back": self.fell_back, "calls": self.calls,
                "seconds": round(self.seconds, 4)}


@dataclass(frozen=True)
class Compiled:
    """The compiled target's output at the inputs, whether it carries a gradient, and its
    answer to each view (label → input → VJP, or Jacobian rows; None where the compiled
    backward gave none). `why_eager`: where dynamo compiled nothing, why (what the environment
    says, else that it skipped every frame); `accepted`: the user said running eagerly is
    fine (--compile-fallback)."""

    output: torch.Tensor
    differentiable: bool
    answers: dict[str, dict[str, torch.Tensor | None]] = field(default_factory=dict)
    stats: CompileStats | None = None
    why_eager: str = ""
    accepted: bool = False


def backend_of(name: str) -> Any:
    """The registered backend `name` (a usage error naming those there are)."""
    known = sorted({*BACKENDS, *torch.compiler.list_backends()})
    if name not in known:
        raise UsageError(f"--compile: no torch.compile backend {name!r}; known: "
                         + ", ".join(known))
    with warnings.catch_warnings():  # (importing dynamo, torch warns of its own deprecations)
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch._dynamo.lookup_backend(name)


class _Counting:
    """A backend that counts the graphs it is handed and compiles each with `inner`."""

    def __init__(self, name: str, inner: Any) -> None:
        self.name, self.inner, self.graphs = name, inner, 0

    def __repr__(self) -> str:  # (dynamo names the backend in its errors)
        return self.name

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Any:
        self.graphs += 1
        return self.inner(gm, example_inputs)


class Compiling(Mode):
    option = "compile"
    excludes = ("nproc", "autocast")
    alone = "check the compiled target in one process, at its own dtype"
    needs = ("compile_fallback",)
    purpose = "a torch.compile'd run"
    first_order = "AOTAutograd has no double backward"
    fits = False

    def wrap(self, target: Target, options: Options) -> Target:
        # (after the target's file: it may register a backend)
        backend_of(options.compile or "")
        return CompiledRun(target, options.compile or "", options.compile_fallback)


class CompiledRun(Wrapper):
    """The target, evaluated eagerly by every engine, and compiled beside them: its own
    answers to the views' questions (`alongside`)."""

    def __init__(self, base: Target, backend: str, fallback: bool = False) -> None:
        super().__init__(base)
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "fallback", fallback)

    def alongside(self, values: Mapping[str, torch.Tensor],
                  questions: Mapping[str, torch.Tensor | None]) -> Compiled:
        done = compiled_run(self.base, values, self.backend, questions)
        return replace(done, accepted=self.fallback)


MODE = Compiling()


def compiled_run(target: Target, values: Mapping[str, torch.Tensor], name: str,
                 questions: Mapping[str, torch.Tensor | None]) -> Compiled:
    """The compiled target at `values` and its answer to each question (label → upstream;
    None: the Jacobian, row by row)."""
    inner = backend_of(name)
    tic = time.perf_counter()
    call = _Call(target, values, name, inner)
    out = call()
    if call.counting.graphs == 0:  # dynamo ran it eagerly (a cache limit reached before us)
        torch.compiler.reset()
        call = _Call(target, values, name, inner)
        out = call()
    answers = _answered(call, out, questions) if out.requires_grad else {}
    reasons = tuple(dict.fromkeys(call.breaks))
    graphs = call.counting.graphs
    stats = CompileStats(name, graphs, len(call.breaks), reasons[:5],
                         max(0, graphs - len(call.breaks) - 1), graphs == 0, call.calls,
                         time.perf_counter() - tic)
    return Compiled(out.detach(), out.requires_grad, answers, stats,
                    _why_eager() if graphs == 0 else "")


def _why_eager() -> str:
    """Why dynamo compiled nothing: the environment's switch, else every frame skipped."""
    if os.environ.get("TORCHDYNAMO_DISABLE", "") not in ("", "0"):
        return ("TORCHDYNAMO_DISABLE is set in the environment, so torch.compile runs every "
                "call eagerly")
    return ("dynamo compiled no graph: it skipped every frame of the target (torch.compile "
            "ran it eagerly)")


class _Call:
    """Calls of the compiled target at the same values, in the same mode (grad mode, the
    inputs leaves that require grad): dynamo compiles on the first and finds its cache after;
    each call's output takes one backward (a compiled backward may free what it saved: donated
    buffers refuse `retain_graph`)."""

    def __init__(self, target: Target, values: Mapping[str, torch.Tensor], name: str,
                 inner: Any) -> None:
        self.counting = _Counting(name, inner)
        self.run = target.compiled(self.counting)
        # (a module's parameters as nn.Parameters, as the compiled module holds them: dynamo
        # guards on their type)
        self.leaves = {n: torch.nn.Parameter(values[n].detach().clone())
                       if n in target.parameters else
                       values[n].detach().clone().requires_grad_(True) for n in target.names}
        self.calls = 0
        self.breaks: list[str] = []

    def __call__(self) -> torch.Tensor:
        before = _breaks()
        with torch.enable_grad(), warnings.catch_warnings():
            # (torch's own modules warn of their deprecations as the backend imports them, and
            # of gradscope's own global module hooks, which a compiled module fires twice)
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.filterwarnings("ignore", message=".*global hooks on modules")
            out = self.run(self.leaves)
        after = _breaks()
        self.breaks += [reason for reason, count in after.items()
                        for _ in range(count - before.get(reason, 0))]
        self.calls += 1
        if not isinstance(out, torch.Tensor):
            raise UsageError("--compile: the compiled target returned no tensor")
        return out


def _breaks() -> dict[str, int]:
    """dynamo's graph-break count by reason (its first line) so far in this process."""
    from torch._dynamo.utils import counters  # (torch's troubleshooting guide reads it)

    found: dict[str, int] = {}
    for reason, count in counters["graph_break"].items():
        line = (str(reason).strip().splitlines() or [""])[0][:200]
        found[line] = found.get(line, 0) + int(count)
    return found


def _answered(call: _Call, out: torch.Tensor, questions: Mapping[str, torch.Tensor | None]
              ) -> dict[str, dict[str, Any]]:
    """One backward per call of the compiled target for each question (the first through the
    call already made)."""
    answers: dict[str, dict[str, Any]] = {}
    first: list[torch.Tensor] = [out]

    def vjp(upstream: torch.Tensor) -> list[torch.Tensor | None]:
        y = first.pop() if first else call()
        grads = torch.autograd.grad(y, list(call.leaves.values()),
                                    upstream.to(y.dtype).reshape(y.shape), allow_unused=True)
        return [g.detach() if g is not None else None for g in grads]

    with user_code("the compiled backward (torch.compile)"):
        for label, upstream in questions.items():
            if upstream is not None:
                answers[label] = dict(zip(call.leaves, vjp(upstream), strict=True))
            elif out.numel() <= MAX_ROWS:
                answers[label] = _jacobian(out, call.leaves, vjp)
    return answers


def _jacobian(out: torch.Tensor, leaves: dict[str, torch.Tensor],
              vjp: Callable[[torch.Tensor], list[torch.Tensor | None]]
              ) -> dict[str, torch.Tensor | None]:
    """(out_numel, in_numel) per input, one backward per output element."""
    rows: dict[str, list[torch.Tensor]] = {n: [] for n in leaves}
    for k in range(out.numel()):
        one = torch.zeros(out.numel(), dtype=out.dtype, device=out.device)
        one[k] = 1
        for name, g in zip(leaves, vjp(one), strict=True):
            rows[name].append(torch.zeros_like(leaves[name]).reshape(-1) if g is None
                              else g.reshape(-1))
    return {n: torch.stack(r) if r else None for n, r in rows.items()}
