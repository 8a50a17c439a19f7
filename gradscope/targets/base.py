"""The Target interface: everything the runner, the engines and the diagnoses may ask of the
thing being checked, as capability methods with defaults. A target kind overrides what it
can do (an expression has a symbolic form, user code runs in a sandbox, a module converts
and switches modes); nothing outside `targets/` asks which class a target is.

Engines receive only the callables they need (`forward`, `traced`), never the target itself,
so they stay independent of how it was written.
"""

# Long: the one interface — every capability with its default in one class, which the run
# modes' wrappers forward generated from it (targets/wrapper.py); split, it would be two.
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol

import torch

from gradscope.errors import TargetError, UsageError
from gradscope.tensors import plain_value

# traced(values) -> (output, branch ids of the kinky ops in a fixed order)
TracedOutput = tuple[torch.Tensor, list[torch.Tensor]]
TracedFn = Callable[[Mapping[str, torch.Tensor]], TracedOutput]


@dataclass(frozen=True)
class BranchSite:
    """A place where the forward branches on the inputs' values, and how many elements took
    each of its sides in one forward: an op with a kink or jump in an expression, a
    comparison, clamp, relu, abs or sign on the inputs in user code."""

    where: str  # `relu(x + 3)`, or `branches.py:19: return torch.where(x < 0, ...)`
    op: str
    sides: tuple[tuple[str, int], ...]  # (label, elements), each side reached or not

    @property
    def reached(self) -> int:
        return sum(1 for _, n in self.sides if n)

    @property
    def elements(self) -> int:
        return sum(n for _, n in self.sides)

    @property
    def one_sided(self) -> bool:
        """Every element took the same side (of a site that saw more than one)."""
        return self.reached == 1 and self.elements > 1


@dataclass(frozen=True)
class Sourced:
    """A forward's output with what its evaluation learned of the graph: each grad_fn's op
    and source text (expressions), the module it ran in (models), and the ops whose output
    is NaN/inf from finite inputs, as (op, where, inputs below, count, module or None)."""

    output: torch.Tensor
    where: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    forward_nan: list[tuple[str, str, tuple[str, ...], int, str | None]] = field(
        default_factory=list)
    modules: Mapping[int, str] = field(default_factory=dict)
    keep: list[Any] = field(default_factory=list)  # grad_fns the ids above belong to
    entered: list[str] = field(default_factory=list)  # models: module paths in forward order
    branches: list[BranchSite] = field(default_factory=list)


@dataclass(frozen=True)
class SymbolicForm:
    """What the symbolic engine needs of a target: its expression IR and the values of its
    data inputs (--const)."""

    expression: Any  # expr.ir.Expression
    constants: Mapping[str, torch.Tensor]


@dataclass(frozen=True)
class FlowSource:
    """How to learn a target's graph for the gradient-flow analysis: a forward that maps
    grad_fn nodes to their source, whether it needs anomaly mode (file:line of user code),
    and whether autograd's own backward can be watched instead of a second one."""

    forward: Callable[[Mapping[str, torch.Tensor]], Sourced]
    anomaly: bool
    watch_first: bool = False  # expressions: the user's backward itself records the flow


@dataclass(frozen=True)
class Twin:
    """The target's own forward beside a run mode's evaluation for autograd, and the lowest
    precision the mode made autograd's evaluation compute in (read once that evaluation ran;
    None: none below the inputs'): the unit its measured change is capped in."""

    forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor]
    precision: Callable[[], torch.dtype | None]


@dataclass(frozen=True)
class Sizes:
    """What an evaluation makes from given input shapes: its largest value (elements, source
    text, shape) and the elements of every value it makes, summed (autograd keeps most of
    them for backward: the evaluation's memory follows the sum, not the largest)."""

    largest: int = 0
    where: str = ""
    shape: tuple[int, ...] = ()
    total: int = 0


class AcrossRanks(Protocol):
    """What a target run across processes offers the features about ranks: each tensor as one
    process would hold it, each rank's custom Function calls recorded (and one of them probed
    with an argument moved), and where the ranks' gradients of one tensor disagreed."""

    def wholes(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor | None]: ...

    def record(self, values: Mapping[str, torch.Tensor], upstream: torch.Tensor,
               recorder: Callable[..., Any]) -> list[list[Any]]: ...

    def probe(self, index: int, argument: int, directions: list[torch.Tensor], step: float
              ) -> list[tuple[torch.Tensor | None, ...]]: ...

    def disagreements(self) -> list[Any]: ...


class Target:
    """Defaults for every capability; a target kind overrides what it offers."""

    text: str  # how the user named it, for headers and diagnostics
    kind: str  # the report's target_kind: "expression", "module", ...

    def __init__(self, text: str, kind: str) -> None:
        self.text, self.kind = text, kind
        self.given: dict[str, torch.Tensor] = {}  # tensors the API passed by position
        self.parameters: dict[str, torch.Tensor] = {}  # a module's, checked with the inputs
        self.constants: dict[str, torch.Tensor] = {}  # --const: data, never differentiated
        self.stated: set[str] = set()  # inputs the user gave a value or shape (--at, --shape)
        self.notes: list[str] = []
        self.branch_sites: list[Any] = []  # kinky op applications (expressions)
        # what calling the target showed (kept while the target is fixed: see `observed`)
        self._observed: dict[str, str] = {}
        self._calls = 0  # calls of the user's code so far (a vmapped batch counts once)

    @property
    def calls(self) -> int:
        """How many times the user's code was called (0 for an expression)."""
        return self._calls

    @property
    def autograd_forward(self) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        """The evaluation autograd differentiates: `forward`, unless a run mode runs it
        another way (under autocast: targets/autocast.py); every other engine evaluates
        `forward` itself."""
        return self.forward

    @property
    def twin(self) -> Twin | None:
        """Where autograd's evaluation is not the target's own forward (a run mode changed
        it), that forward: what the references evaluate, and what the mode's change to
        autograd's answer is measured against. None: autograd differentiates `forward`."""
        return None

    def alongside(self, values: Mapping[str, torch.Tensor],
                  questions: Mapping[str, torch.Tensor | None]) -> Any:
        """A run mode's own answers to the views' questions (label → upstream; None: the
        Jacobian) at `values` — the compiled target's — which that mode's feature compares
        with autograd's; None where the target has no such run."""
        return None

    def ranks(self) -> AcrossRanks | None:
        """The ranks' own capabilities where the target runs across processes; None: in one
        process."""
        return None

    @property
    def ordinary_only(self) -> str | None:
        """Why this target may be called only the ordinary way (grad mode, its inputs
        requiring grad, one evaluation at a time) whatever the options ask — said in a note —
        or None."""
        return None

    def again(self, values: Mapping[str, torch.Tensor],
              forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
              ) -> torch.Tensor:
        """autograd's forward (or `forward`: a wrapper's) once more at `values`, its graph
        unneeded (the determinism check's second evaluation): without a graph where the target
        can be called so (no memory for one), else the ordinary way."""
        return without_graph(forward or self.autograd_forward, values)

    takes_init = False  # --init: constructor arguments (a module class)

    # ------------------------------------------------------------ prepared, then fixed
    def ready(self) -> None:
        """Prepared (runner's first stage is done): from here on no stage changes the target.
        Its public attributes can no longer be set and its containers become read-only
        (lists tuples, sets frozensets, dicts read-only views); private caches (`_name`)
        still fill as they are asked."""
        for name, value in list(vars(self).items()):
            if name.startswith("_"):
                continue
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
            elif isinstance(value, set):
                object.__setattr__(self, name, frozenset(value))
            elif isinstance(value, dict):
                object.__setattr__(self, name, MappingProxyType(value))
        object.__setattr__(self, "_ready", True)

    def finished(self) -> None:
        """The check is over (anything the target's calls changed on the user's objects is
        put back)."""

    def observed(self) -> list[str]:
        """Notes on what calling the target showed about it (grad mode left switched), one
        per kind of thing, in the order first seen."""
        return list(getattr(self, "_observed", {}).values())

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and getattr(self, "_ready", False):
            raise AttributeError(f"{type(self).__name__}.{name}: the target is prepared, and no "
                                 "later stage may change it")
        super().__setattr__(name, value)

    # ------------------------------------------------------------ what it is called with
    def bind_arguments(self, args: Mapping[str, Any], positional: tuple[Any, ...]) -> None:
        """--arg values and the API's positional arguments: tensors for the inputs in order;
        a target that takes no other argument refuses the rest."""
        if args:
            raise UsageError(f"--arg gives non-tensor arguments; {self.text} takes none")
        names = self.names
        if len(positional) > len(names):
            raise UsageError(f"{self.text} takes {len(names)} argument(s), got "
                             f"{len(positional)}")
        for name, value in zip(names, positional, strict=False):
            if not isinstance(value, torch.Tensor):
                raise UsageError(f"{self.text}: `{name}` takes a tensor, got "
                                 f"{type(value).__name__}")
            self.given[name] = value

    @property
    def names(self) -> tuple[str, ...]:
        """The differentiable inputs and parameters, in order."""
        raise NotImplementedError

    def roles(self) -> dict[str, str]:
        return {n: ("parameter" if n in self.parameters else "input") for n in self.names}

    def adopt(self, name: str) -> bool:
        """Make an optional argument `name` an input because an option gives it a value
        (False: the target has no such argument)."""
        return False

    def hold(self, constants: Mapping[str, torch.Tensor]) -> None:
        """Make these inputs data (--const, or left out by --only/--skip)."""
        self.constants = dict(constants)

    def domain(self, name: str) -> tuple[float, float] | None:
        """Where default random values of `name` should lie (None: anywhere)."""
        return None

    def suggested_shape(self, name: str) -> tuple[tuple[int, ...], str] | None:
        """A shape for a random `name` that the target tells (a module's first layer)."""
        return None

    def guessed(self, given: set[str]) -> list[str]:
        """Notes on inputs made random tensors by guess."""
        return []

    def sizes(self, shapes: Mapping[str, tuple[int, ...]]) -> Sizes:
        """What these input shapes make (output and intermediates), found before anything is
        computed; Sizes() where the target cannot tell before running."""
        return Sizes()

    # ------------------------------------------------------------ how it is prepared
    def convert(self, dtype: torch.dtype, device: torch.device | None = None) -> None:
        """Run in the check's dtype and device (a module's own parameters in another)."""

    def set_mode(self, mode: str | None) -> None:
        """--mode: switch the modules it reaches (none: said in a note)."""
        if mode is not None:
            self.notes.append(f"--mode {mode} had nothing to switch: the target reaches no "
                              "nn.Module")

    def pick_output(self, choice: int | str) -> None:
        """--output-index/--output-key: which of several outputs is checked."""
        raise UsageError("--output-index/--output-key pick among the outputs of Python code; "
                         "an expression has one output")

    # ------------------------------------------------------------ how it is evaluated
    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        raise NotImplementedError

    def reinstate(self, values: Mapping[str, torch.Tensor]) -> None:
        """Before a backward of a graph the target's forward made at `values`: the user's
        objects hold what they held in that forward (a module's parameter slots: held.py),
        since other evaluations may have come between. Nothing for a target that holds
        nothing."""

    def traced(self, values: Mapping[str, torch.Tensor]) -> TracedOutput:
        """Values for finite differences, with the branch id of every kinky op."""
        return self.forward(values), []

    # traced_around(base) for targets that reuse work between nearby points (expressions),
    # else None: see engines.fd.engine.Around
    traced_around: Callable[..., Any] | None = None

    @property
    def elementwise_inputs(self) -> set[str]:
        """Inputs each output element depends on through its own element only (declared)."""
        return set()

    @property
    def is_elementwise(self) -> bool:
        return False

    @property
    def readable(self) -> bool:
        """Whether gradscope can read the target's structure (an expression declares which
        inputs are elementwise; code is probed for it instead)."""
        return False

    _unbatched = False  # (set where a custom op is called: see batchable)

    @property
    def batchable(self) -> bool:
        """Whether finite differences may evaluate many points in one vmapped call (not where
        a custom op is called: vmap would run its fallback op by op, warning from C++ each
        time)."""
        return not self._unbatched

    @property
    def precompiled(self) -> bool:
        """The target is already a torch.compile'd function or module: every mode change
        (no_grad, vmap, a watching TorchFunctionMode) would make dynamo compile it again."""
        return False

    @property
    def runs_user_code(self) -> bool:
        """The user's own code runs: its forward may be random, its backward hand-written
        (checked for linearity, determinism and writes into grad_output)."""
        return False

    @property
    def checks_backward(self) -> bool:
        """Its backward is the user's own (a custom Function somewhere in user code): checked
        for linearity in grad_output, determinism and writes into grad_output."""
        return False

    def symbolic(self) -> SymbolicForm | str:
        """The symbolic form, or why there is none."""
        return ("Python code has no symbolic form (autograd is compared with finite "
                "differences)")

    def flow_source(self) -> FlowSource | None:
        """How the gradient-flow analysis learns the graph (None: it does not)."""
        return None

    @property
    def watchable(self) -> bool:
        """Whether a check may watch the target's forward (the gradient-flow trace's second,
        watched run) — not where it is called only the ordinary way."""
        return True

    def for_values(self, output: torch.Tensor) -> tuple[TracedFn, list[str]]:
        """The traced function finite differences evaluate, learned from autograd's own
        `output` (its graph), and notes on what was learned."""
        return self.traced, []

    def marker(self) -> str | None:
        """A surrogate declaration on the target itself (gradscope.surrogate)."""
        return None

    @property
    def own_function(self) -> type | None:
        """The custom Function class the target is, called once on its inputs (its backward
        is what the table checks: the culprit of any mismatch), else None."""
        return None

    def numbers(self) -> dict[str, float]:
        """The user's own numbers a wrong factor may be read as ({label: value}: --arg
        values, defaults, constants written in the code or the expression)."""
        return {}

    def surrogate_reference(self) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None:
        """The intended form declared with the marker (`reference=`), called the way the
        target is: its gradient is what the declared surrogate must be."""
        return None

    def compiled(self, backend: Any) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        """--compile: the target as `torch.compile(target, backend=backend)` makes it, called
        with the inputs' values (what is compiled is the target's own evaluation)."""
        run = torch.compile(self.forward, backend=backend)
        return lambda values: run(dict(values))

    def op_call(self, values: Mapping[str, torch.Tensor]) -> tuple[Any, tuple, dict] | None:
        """A custom op target: the op and its arguments at `values` (what
        torch.library.opcheck is given); None for any other target."""
        return None

    def perturbed_failure(self, exc: BaseException) -> str:
        """Why finite differences failed, from what the target raised at a perturbed point."""
        last = _last_line(exc)
        return f"the target failed at a perturbed point: {last}"


def without_graph(forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor],
                  values: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """One more evaluation of `forward` at `values`: without a graph (no memory for one) where
    it runs so, else the plain way — grad mode, the inputs leaves that require grad as
    autograd's own evaluation had them (code that registers a hook or differentiates inside
    its forward needs both)."""
    try:
        with torch.no_grad():
            return forward(dict(values))
    except TargetError:
        return plain_value(forward, values)


def _last_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[-1][:160] if text else type(exc).__name__
