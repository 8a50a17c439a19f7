"""Every option of a check: its default, how it is read, how it is validated, and its help.

`Options` is the one place that says so. The CLI builds its typer options from `SPECS`, the
Python API takes the same names as keyword arguments, and the run config takes them as keys;
none of them repeats a default. Imports nothing heavy (no torch): `gradscope --help` reads it.
"""

# Long: every option lives here with its default, reader, validation and help, so that the
# CLI, the config and the Python API cannot drift apart; split, each option would be in two.
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from gradscope.compare.tolerance import tolerance_help
from gradscope.engines.fd.policy import DEFAULT_EPS, MAX_EPS, MIN_EPS
from gradscope.errors import UsageError
from gradscope.option_text import MAX_ELEMENTS, parse_assignment, parse_literal, parse_shape

COMMANDS = ("check", "jvp", "jacobian")
DTYPES = ("float64", "float32", "float16", "bfloat16")
FAIL_ON = ("mismatch", "warning", "never")
MODES = ("train", "eval")
ANY_INPUT = "*"  # key of a shape or tangent given without a NAME
INPUT_NAME = r"[A-Za-z_][\w.]*"  # an input or parameter name (`x`, `blocks.0.weight`)
VALUE_HELP = ("1.5, 1,2,3, [[1,2],[3,4]], or randn(2,6), rand(3), uniform(lo,hi,2,3), ones(3), "
              "zeros(3), linspace(lo,hi,n), arange(n)")
RUNS = COMMANDS  # the commands that run all three engines
TRACES = ("graph", "sweep")  # commands that build a target without checking it


@dataclass(frozen=True)
class Spec:
    """How one option is spelled and read: on the command line (`flag`, `cli` type, `commands`
    that offer it) and in a run config (`toml` types, described as `expects`)."""

    flag: str
    help: str
    cli: type  # str, int, float, bool or list (repeatable NAME=VALUE text)
    toml: tuple[type, ...]
    expects: str
    commands: tuple[str, ...] = RUNS + TRACES
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    value: bool = False  # a VALUE: text, number, list or tensor (read when inputs are bound)
    bare: str | None = None  # what the flag means given without a value (`--surrogate`)
    shorthands: tuple[str, ...] = ()  # flags that mean the option with one of its choices
    # (`--eval` for `--mode eval`): `--CHOICE`
    panel: str | None = None  # the section of --help it is listed in (a feature's option)


@dataclass(frozen=True)
class Option:
    """An option a feature owns (declared on the feature, merged by the feature registry into
    the command line, the Python API and the run config): its name — the keyword and the
    config key —, its default, its spec and, where the value needs one, a reader (raw value,
    how to name it → the value; it refuses a wrong one with a UsageError)."""

    name: str
    default: Any
    spec: Spec
    reader: Callable[[Any, str], Any] | None = None

    def value(self, options: Options) -> Any:
        """Its value in `options` (the default where not given)."""
        return options.owned.get(self.name, self.default)


def _about(*args: Any, **kw: Any) -> dict[str, Spec]:
    """A field's metadata: its Spec."""
    return {"spec": Spec(*args, **kw)}


_NUMBER = ((int, float), "a number")
_WHOLE = ((int,), "a whole number")


@dataclass(frozen=True)
class Options:
    """The options of one check, with their defaults. Inputs come already read: NAME → VALUE
    (text, number, list or tensor), shapes as tuples, non-tensor arguments as Python values."""

    at: dict[str, Any] = field(default_factory=dict, metadata=_about(
        "--at", f"Value of an input (repeatable). VALUE: {VALUE_HELP}.", list, (dict,),
        "a table NAME = VALUE", metavar="NAME=VALUE"))
    const: dict[str, Any] = field(default_factory=dict, metadata=_about(
        "--const", "An input that is data, not a variable (class indices, masks, targets): "
        f"built like --at (whole numbers stay integers), never differentiated or perturbed. "
        f"VALUE: {VALUE_HELP}, randint(lo,hi,*shape).", list, (dict,), "a table NAME = VALUE",
        metavar="NAME=VALUE"))
    shape: dict[str, tuple[int, ...]] = field(default_factory=dict, metadata=_about(
        "--shape", "Shape of a random input (NAME=2,3), or the default for all (2,3).", list,
        (str, list, dict), "\"2,3\", [2, 3] or a table NAME = \"2,3\"",
        commands=(*RUNS, "graph"), metavar="[NAME=]2,3"))
    grad: Any = field(default=None, metadata=_about(
        "--grad", "Upstream vector v for y.backward(v); must be shaped like the output. "
        "Default: ones.", str, (str, int, float, list), "a VALUE string, number or array",
        commands=("check", "jvp", *TRACES), metavar="VALUE", value=True))
    tangent: dict[str, Any] | None = field(default=None, metadata=_about(
        "--tangent", "Forward-mode direction for an input (repeatable; others get zeros). With "
        "one input, VALUE alone is enough. Adds J·t from torch forward AD, sympy and finite "
        "differences.", list, (dict, str, int, float, list),
        "a table NAME = VALUE (or one VALUE)", commands=("jvp",), metavar="[NAME=]VALUE"))
    arg: dict[str, Any] = field(default_factory=dict, metadata=_about(
        "--arg", "Non-tensor argument of a Python target (repeatable), e.g. --arg n=4; a "
        "bare name is an nn.Module of the target's file (--arg model=net).", list,
        (dict,), "a table NAME = literal", metavar="NAME=LITERAL"))
    init: dict[str, Any] = field(default_factory=dict, metadata=_about(
        "--init", "Constructor argument of an nn.Module class target (repeatable).", list,
        (dict,), "a table NAME = literal", metavar="NAME=LITERAL"))
    output_index: int | None = field(default=None, metadata=_about(
        "--output-index", "For a target returning a tuple or list: the position of the output "
        "to check (0 for the first).", int, (int,), "a whole number", metavar="N"))
    output_key: str | None = field(default=None, metadata=_about(
        "--output-key", "For a target returning a dict or a model-output object: the key or "
        "attribute of the output to check (`loss`).", str, (str,), "a key", metavar="KEY"))
    mode: str | None = field(default=None, metadata=_about(
        "--mode", "train or eval: the mode modules are checked in (default: each module's "
        "own; --eval and --train for short). Dropout and batch statistics differ between "
        "them; a copy is switched, never your module.", str, (str,), ", ".join(MODES),
        choices=MODES, shorthands=MODES))
    order: int = field(default=1, metadata=_about(
        "--order", "2: also differentiate the VJP and check double backward (like "
        "gradgradcheck).", int, *_WHOLE, commands=("check", "jvp"), minimum=1, maximum=2))
    intermediates: bool = field(default=False, metadata=_about(
        "--intermediates", "Also report the gradient of every intermediate (non-leaf) tensor.",
        bool, (bool,), "true or false", commands=("check", "jvp")))
    repeat: int = field(default=1, metadata=_about(
        "--repeat", "Call backward N times without zeroing .grad and show that gradients "
        "accumulate to N × the VJP.", int, *_WHOLE, commands=("jvp",), minimum=1,
        maximum=1000))
    dtype: str = field(default="float64", metadata=_about(
        "--dtype", "Dtype of the autograd computation; tolerances follow it.", str, (str,),
        ", ".join(DTYPES), choices=DTYPES))
    eps: float | None = field(default=None, metadata=_about(
        "--eps", f"Relative finite-difference step: h = eps*max(1,|x|). [default: "
        f"{DEFAULT_EPS:g}]", float, *_NUMBER, commands=(*RUNS, "sweep")))
    atol: float | None = field(default=None, metadata=_about(
        "--atol", f"Absolute tolerance. [default: {tolerance_help(1)}]", float, *_NUMBER,
        commands=RUNS))
    rtol: float | None = field(default=None, metadata=_about(
        "--rtol", f"Relative tolerance. [default: {tolerance_help(0)}]", float, *_NUMBER,
        commands=RUNS))
    seed: int = field(default=0, metadata=_about(
        "--seed", "Seed of random inputs and upstreams.", int, *_WHOLE, minimum=0,
        maximum=2**63 - 1))
    device: str = field(default="cpu", metadata=_about(
        "--device", "cpu, cuda or cuda:N.", str, (str,), "cpu, cuda or cuda:N"))
    fail_on: str = field(default="mismatch", metadata=_about(
        "--fail-on", "mismatch: exit 1 on a mismatch; warning: also on any diagnostic; never: "
        "always exit 0.", str, (str,), ", ".join(FAIL_ON), commands=RUNS, choices=FAIL_ON))
    surrogate: tuple[str, ...] = field(default=(), metadata=_about(
        "--surrogate", "Declare that backward departs from the derivative on purpose: alone "
        "for every input, or --surrogate NAME[,NAME] (repeatable). Mismatches of those inputs "
        "become `surrogate`, with how they relate to the derivative; everything else is still "
        "checked. --surrogate NAME=EXPRESSION declares the intended form: the gradient of "
        "EXPRESSION (over the inputs, e.g. x=hardtanh(x)) is what backward must give, element "
        "by element.", list, (bool, str, list, dict),
        "true, an input name, NAME=EXPRESSION, a list of them or a table of NAME = EXPRESSION",
        commands=RUNS, metavar="[NAME[=EXPRESSION]]", bare=ANY_INPUT))
    only: tuple[str, ...] = field(default=(), metadata=_about(
        "--only", "Check only the inputs and parameters whose names match this glob "
        "(`blocks.*.attn.*`; repeatable); the others are held as data.", list, (str, list),
        "a glob or a list of globs", commands=RUNS, metavar="PATTERN"))
    skip: tuple[str, ...] = field(default=(), metadata=_about(
        "--skip", "Do not check the inputs and parameters whose names match this glob "
        "(repeatable); they are held as data.", list, (str, list), "a glob or a list of globs",
        commands=RUNS, metavar="PATTERN"))
    allow_nan: bool = field(default=False, metadata=_about(
        "--allow-nan", "Accept NaN or inf in the output or in autograd's gradient at the given "
        "inputs (by default that fails, as in gradcheck).", bool, (bool,), "true or false",
        commands=RUNS))
    plain: bool = field(default=False, metadata=_about(
        "--plain", "Evaluate your code only the plain way: ordinary calls in grad mode, one "
        "evaluation at a time — no vmap batching, no stand-ins on Function classes, no watched "
        "or no-grad forwards (slower; the verdict is the same, some explanations are left out). "
        "gradscope falls back to it by itself where a shortcut does not fit.", bool, (bool,),
        "true or false", commands=RUNS))
    nproc: int = field(default=0, metadata=_about(
        "--nproc", "Run the target on N ranks with torch.distributed, started here by torch's "
        "elastic launch (at most 16; gloo on the CPU, nccl with --device cuda); its collectives "
        "run as in training and its gradients are compared on every rank. Under torchrun or "
        "srun, leave it out: every rank runs the check (docs/distributed.md). 0, the default: "
        "no process group.", int, *_WHOLE,
        commands=RUNS, minimum=0, maximum=1 << 20, metavar="N"))
    sharded: tuple[str, ...] = field(default=(), metadata=_about(
        "--sharded", "With --nproc: tensors (globs) that are each rank's own part, perturbed "
        "on that rank only (by default: what the code says, else values that differ between "
        "ranks).", list, (str, list), "a glob or a list of globs", commands=RUNS,
        metavar="PATTERN"))
    replicated: tuple[str, ...] = field(default=(), metadata=_about(
        "--replicated", "With --nproc: tensors (globs) that are one quantity on every rank, "
        "perturbed on all ranks at once.", list, (str, list), "a glob or a list of globs",
        commands=RUNS, metavar="PATTERN"))
    context: str | None = field(default=None, metadata=_about(
        "--context", "With --nproc: a context manager defined or imported in the target's "
        "file (loss_parallel), entered on every rank around each forward and its backward.",
        str, (str,), "a name in the target's file", commands=RUNS, metavar="NAME"))
    after_backward: str | None = field(default=None, metadata=_about(
        "--after-backward", "With --nproc: a function in the target's file that completes the "
        "gradients after backward on every rank (Megatron's finalize_model_grads), called with "
        "the module (a module target) or with nothing.", str, (str,),
        "a name in the target's file", commands=RUNS, metavar="NAME"))
    partial_grad: tuple[str, ...] = field(default=(), metadata=_about(
        "--partial-grad", "With --nproc: replicated tensors (globs) whose gradient each rank "
        "holds only a part of, by design: their sum over ranks is compared.", list,
        (str, list), "a glob or a list of globs", commands=RUNS, metavar="PATTERN"))
    compare_single: bool = field(default=False, metadata=_about(
        "--compare-single", "With --nproc: also run the target in one process (world size 1) "
        "at the same values and fail where its output or gradients differ from the ranks'.",
        bool, (bool,), "true or false", commands=RUNS))
    compile: str | None = field(default=None, metadata=_about(
        "--compile", "Also run the target as torch.compile(target, backend=BACKEND) (eager, "
        "aot_eager, inductor): its output and gradients are compared with eager's and the "
        "references', and any difference fails the run (compiled_differs).", str, (str,),
        "a torch.compile backend", commands=RUNS, metavar="BACKEND"))
    compile_fallback: bool = field(default=False, metadata=_about(
        "--compile-fallback", "With --compile: accept a run where dynamo compiled nothing and "
        "the target ran eagerly (the environment disables dynamo, every frame was skipped); "
        "without it such a run fails as inconclusive, since no compiled gradient was "
        "compared.", bool, (bool,), "true or false", commands=RUNS))
    autocast: str | None = field(default=None, metadata=_about(
        "--autocast", "Run autograd's forward under torch.autocast(device, DTYPE) (bfloat16, "
        "float16) with float32 inputs, as mixed-precision training does; finite differences "
        "run without autocast, and tolerances are float32's, widened element by element by "
        "what autocast measurably changed in autograd's answer (custom_fwd/custom_bwd "
        "Functions are checked the way they train).", str, (str,),
        "bfloat16 or float16", commands=RUNS, metavar="DTYPE",
        choices=("bfloat16", "float16")))
    imports: tuple[str, ...] = field(default=(), metadata=_about(
        "--import", "A Python file or module imported before the target is read, for what it "
        "registers (custom ops: check NS::OP --import ops.py); repeatable.", list,
        (str, list), "a file or module, or a list of them", commands=(*RUNS, "graph",
                                                                         "sweep"),
        metavar="FILE.py"))
    max_elements: int = field(default=10_000, metadata=_about(
        "--max-elements", "Tensors larger than this are reported by their worst elements.", int,
        *_WHOLE, commands=RUNS, minimum=1))
    full: bool = field(default=False, metadata=_about(
        "--full", "Report every element of every tensor.", bool, (bool,), "true or false",
        commands=RUNS))
    max_elements_total: int = field(default=MAX_ELEMENTS, metadata=_about(
        "--max-elements-total", "Refuse inputs holding more elements than this, before "
        "allocating them.", int, *_WHOLE, commands=RUNS, minimum=1))
    max_fd: int = field(default=100_000, metadata=_about(
        "--max-fd", "A non-elementwise input with more elements than this gets finite "
        "differences for a seeded sample of --sample elements plus random projections over all "
        "of them. Raising it is cheap for losses like mean((x - y)**2), whose columns are "
        "evaluated incrementally.", int, *_WHOLE, commands=RUNS, minimum=1))
    sample: int = field(default=1_000, metadata=_about(
        "--sample", "How many elements of a sampled input get their own finite difference.",
        int, *_WHOLE, commands=RUNS, minimum=1))
    # the values of the options features own (`Option`), by name: read through `Option.value`
    owned: Mapping[str, Any] = field(default_factory=dict)

    def validate(self, name_of: Callable[[str], str] | None = None) -> Options:
        """Range checks needing no torch; a UsageError names the option (flag or name_of)."""
        def called(name: str) -> str:
            return name_of(name) if name_of else SPECS[name].flag

        if str(self.dtype).startswith("torch."):  # torch.float32: the object, or its name
            return replace(self, dtype=str(self.dtype)[6:]).validate(name_of)
        self._types(called)
        _choice(called("dtype"), self.dtype, DTYPES)
        _choice(called("fail_on"), self.fail_on, FAIL_ON)
        if self.mode is not None:
            _choice(called("mode"), self.mode, MODES)
        if self.autocast is not None:
            _choice(called("autocast"), self.autocast, ("bfloat16", "float16"))
        for name in ("eps", "atol", "rtol"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < float("inf"):  # NaN fails both
                raise UsageError(f"{called(name)} must be a finite number >= 0, got {value}")
        if self.eps is not None and not MIN_EPS <= self.eps <= MAX_EPS:
            raise UsageError(f"{called('eps')} must be in [{MIN_EPS:g}, {MAX_EPS:g}] (a "
                             "relative step; smaller ones drown in round-off), got "
                             f"{self.eps}")
        for name, spec in SPECS.items():
            _ranged(spec, getattr(self, name), called(name))
        return self

    def _types(self, called: Callable[[str], str]) -> None:
        for name, spec in SPECS.items():
            _typed(spec, getattr(self, name), called(name))

    def updated(self, **changes: Any) -> Options:
        return replace(self, **changes)

    @property
    def surrogates(self) -> SurrogateDeclaration:
        """--surrogate, read: what it declares."""
        return SurrogateDeclaration.of(self.surrogate)


def _typed(spec: Spec, value: Any, flag: str) -> None:
    """A scalar option has its type (a string atol is refused here, not by torch)."""
    if spec.cli is list or spec.value or value is None:
        return
    kinds = (int, float) if spec.cli is float else (spec.cli,)
    if isinstance(value, bool) != (spec.cli is bool) or not isinstance(value, kinds):
        raise UsageError(f"{flag} must be {spec.expects}, got {value!r}")


def _ranged(spec: Spec, value: Any, flag: str) -> None:
    if spec.minimum is not None and value < spec.minimum:
        raise UsageError(f"{flag} must be at least {spec.minimum}")
    if spec.maximum is not None and value > spec.maximum:
        raise UsageError(f"{flag} must be {spec.minimum} to {spec.maximum}, got {value}")


SPECS: dict[str, Spec] = {f.name: f.metadata["spec"] for f in fields(Options)
                          if "spec" in f.metadata}
DEFAULTS = Options()


def _choice(flag: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise UsageError(f"unknown {flag} {value!r}; allowed: {', '.join(allowed)}")


@dataclass(frozen=True)
class Request:
    """One run of a command: what to check and how. The CLI, the API and the run config each
    build one from `Options`; `runner.run` and the tools take it."""

    command: str
    target: Any
    options: Options = field(default_factory=Options)
    positional: tuple[Any, ...] = ()  # API: a callable's arguments in order
    base: Path | None = None  # folder that relative file targets are resolved against
    progress: Callable[[str, int], Callable[[int], None] | None] | None = None
    notes: tuple[str, ...] = ()  # said first in the report (defaults taken from a config)
    # False: the analyses that only explain are left out (the gradient-flow trace and its
    # watched forward, custom Functions checked in place) — for callers that show a report
    # only when it fails and then ask again with explanations (the gradcheck drop-in); the
    # verdict is the same (explanations never decide)
    explain_passing: bool = True
    # True: finite differences compare every element whose Jacobian column memory holds, the
    # work and flop budgets notwithstanding (the gradcheck drop-in: torch's slow mode compares
    # every element, so a sample of them would be a pass below torch's)
    compare_all: bool = False

    def __post_init__(self) -> None:
        _choice("command", self.command, COMMANDS)


# ------------------------------------------------------------------ reading raw values
def read(name: str, raw: Any, where: str | None = None) -> Any:
    """An option's value from the CLI (text, repeatable text), a config (TOML value) or the API
    (Python value), in the form `Options` holds. `where` names it in errors."""
    where = where or SPECS[name].flag
    reader = _READERS.get(name)
    return reader(raw, where) if reader is not None else raw


def assignments(raw: Any, where: str) -> dict[str, Any]:
    """NAME=VALUE items (a list of text) or a mapping → {NAME: VALUE}."""
    if isinstance(raw, Mapping):
        return dict(raw)
    out: dict[str, Any] = {}
    for item in raw or []:
        name, value = parse_assignment(item, where)
        if name in out:
            raise UsageError(f"{where} gives `{name}` twice")
        out[name] = value
    return out


def _literals(raw: Any, where: str, names: bool = False) -> dict[str, Any]:
    """NAME=LITERAL text (read with ast.literal_eval) or a mapping of Python values (the API
    passes any object; a run config's values are checked as literals when it is loaded);
    `names`: a bare identifier names an object of the target's file (--arg model=net)."""
    if isinstance(raw, Mapping):
        return dict(raw)
    return {name: parse_literal(text, _sub(where, name), names)
            for name, text in assignments(raw, where).items()}


def _arguments(raw: Any, where: str) -> dict[str, Any]:
    return _literals(raw, where, names=True)


def _shapes(raw: Any, where: str) -> dict[str, tuple[int, ...]]:
    """--shape items (`x=2,3` or `2,3`), a mapping NAME → shape, or one shape for all."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return {k: _one_shape(v, _sub(where, k)) for k, v in raw.items()}
    if isinstance(raw, int | tuple) or (isinstance(raw, list) and all(
            isinstance(v, int) for v in raw)):
        return {ANY_INPUT: _one_shape(raw, where)}
    if isinstance(raw, str):
        raw = [raw]
    named: dict[str, tuple[int, ...]] = {}
    for item in raw:
        if "=" in item:
            name, _, text = item.partition("=")
            if name.strip() in named:
                raise UsageError(f"{where} gives `{name.strip()}` twice")
            named[name.strip()] = _one_shape(text, _sub(where, name.strip()))
        else:
            if ANY_INPUT in named:
                raise UsageError(f"{where} without a NAME (the default shape) is given twice")
            named[ANY_INPUT] = _one_shape(item, where)
    return named


def _sub(where: str, name: str) -> str:
    """`--arg n` on the command line, `arg.n` in a config."""
    return f"{where} {name}" if where.startswith("-") else f"{where}.{name}"


def _one_shape(value: Any, what: str) -> tuple[int, ...]:
    if isinstance(value, bool):
        raise UsageError(f"`{what}` must be \"2,3\" or [2, 3]")
    if isinstance(value, int):
        value = [value]
    if isinstance(value, list | tuple):
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            raise UsageError(f"`{what}` must be whole numbers")
        value = ",".join(str(v) for v in value) or "()"
    if not isinstance(value, str):
        raise UsageError(f"`{what}` must be \"2,3\" or [2, 3]")
    return parse_shape(value, what)


def _tangents(raw: Any, where: str) -> dict[str, Any] | None:
    """--tangent items, a mapping, or one VALUE (for a target with one input)."""
    if raw is None or (isinstance(raw, list) and not raw):
        return None
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, list) and all(isinstance(r, str) for r in raw):
        if len(raw) == 1 and not re.match(r"\s*[A-Za-z][A-Za-z0-9_]*\s*=", raw[0]):
            return {ANY_INPUT: raw[0]}
        return assignments(raw, where)
    return {ANY_INPUT: raw}


def _names(raw: Any, where: str) -> tuple[str, ...]:
    """--surrogate: true/false, names (comma-separated), NAME=EXPRESSION (kept whole), a list
    of them, or a table {NAME: EXPRESSION}; ANY_INPUT stands for every input."""
    if raw is None or raw is False or raw is True:
        return (ANY_INPUT,) if raw is True else ()
    if isinstance(raw, dict) and all(isinstance(v, str) for v in raw.values()):
        raw = [f"{k}={v}" for k, v in raw.items()]
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise UsageError(f"{where} takes true, an input name, NAME=EXPRESSION or a list of "
                         f"them, got {raw!r}")
    out: list[str] = []
    for item in items:
        if "=" in item:
            name, _, expression = (part.strip() for part in item.partition("="))
            if not re.fullmatch(INPUT_NAME, name) or not expression:
                raise UsageError(f"{where}: {item!r} is not NAME=EXPRESSION (an input name, "
                                 "then the expression whose gradient is the intended one)")
            out = [o for o in out if SurrogateDeclaration.of((o,)).names[0] != name] + [
                f"{name}={expression}"]
            continue
        for name in (n.strip() for n in item.split(",")):
            if name != ANY_INPUT and not re.fullmatch(INPUT_NAME, name):
                raise UsageError(f"{where}: {name!r} is not an input name")
            if name not in SurrogateDeclaration.of(tuple(out)).names:
                out.append(name)
    return tuple(out)


@dataclass(frozen=True)
class SurrogateDeclaration:
    """--surrogate read into what it declares (the one place its items are split): the
    inputs declared, in order (ANY_INPUT: every input), and the intended form given for any
    of them (NAME=EXPRESSION: input → expression)."""

    names: tuple[str, ...] = ()
    forms: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, items: tuple[str, ...]) -> SurrogateDeclaration:
        names, forms = [], {}
        for item in items:  # (items as `_names` normalised them: NAME or NAME=EXPRESSION)
            name, _, expression = (part.strip() for part in item.partition("="))
            names.append(name)
            if expression:
                forms[name] = expression
        return cls(tuple(names), forms)


def _globs(raw: Any, where: str) -> tuple[str, ...]:
    """--only/--skip: globs, repeatable, or a list of them."""
    items = [raw] if isinstance(raw, str) else list(raw or ())
    if not all(isinstance(i, str) and i.strip() for i in items):
        raise UsageError(f"{where} takes name globs such as `blocks.*.attn.*`, got {raw!r}")
    return tuple(i.strip() for i in items)


_READERS: dict[str, Callable[[Any, str], Any]] = {
    "at": assignments, "const": assignments, "shape": _shapes, "tangent": _tangents,
    "arg": _arguments, "init": _literals, "surrogate": _names, "only": _globs, "skip": _globs,
    "sharded": _globs, "replicated": _globs, "partial_grad": _globs, "imports": _globs,
}


def from_values(values: Mapping[str, Any], where: Callable[[str], str] | None = None,
                owned: Mapping[str, Option] | None = None) -> Options:
    """Options from raw values by option name (missing ones keep their defaults), validated;
    `owned`: the options features own (the registry's), which the values may give too."""
    owned = owned or {}
    unknown = sorted(set(values) - set(SPECS) - set(owned))
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}; options are: "
                         f"{', '.join([*SPECS, *owned])}")
    read_values = {k: read(k, v, where(k) if where else None) for k, v in values.items()
                   if k in SPECS}
    mine = {k: _owned(owned[k], v, f"`{where(k)}`" if where else owned[k].spec.flag)
            for k, v in values.items() if k in owned}
    return Options(**read_values, owned=mine).validate(
        (lambda n: f"`{where(n)}`") if where else None)


def _owned(option: Option, raw: Any, flag: str) -> Any:
    """A feature's option's value, read and checked by its spec (and its reader)."""
    value = option.reader(raw, flag) if option.reader is not None else raw
    _typed(option.spec, value, flag)
    if value is not None:
        _ranged(option.spec, value, flag)
    return value


def finite_at_least_zero(raw: Any, flag: str) -> Any:
    """A reader: a finite number >= 0 (a tolerance)."""
    if isinstance(raw, int | float) and not isinstance(raw, bool) and \
            not 0 <= raw < float("inf"):  # (NaN fails both)
        raise UsageError(f"{flag} must be a finite number >= 0, got {raw}")
    return raw
