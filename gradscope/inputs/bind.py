"""Options + a target → the tensors a run works on, bound once: inputs (given, module
parameters or seeded random), the upstream vector and tangents, cast to the run's dtype and
device. Every size is checked before anything is allocated, and every shape check that names an
option lives here.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.errors import UnknownName, UsageError
from gradscope.inputs.text import (
    SPREAD,
    SPREAD_HALF,
    InputValue,
    parse_value,
    random_value,
)
from gradscope.option_text import MAX_ELEMENTS
from gradscope.options import ANY_INPUT, Options
from gradscope.options import DTYPES as DTYPE_NAMES
from gradscope.tensors import all_finite

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}  # name → torch dtype
HALF = ("float16", "bfloat16")


@dataclass(frozen=True)
class Upstream:
    """The upstream vector v of `y.backward(v)`, read once: the --grad value, or none given,
    which means ones shaped like the output (the default: the one place that says so)."""

    given: InputValue | None = None

    @property
    def ones(self) -> bool:
        return self.given is None

    @property
    def source(self) -> str:
        """How the report names it: "ones" (the default) or "--grad"."""
        return "ones" if self.given is None else "--grad"

    def tensor_for(self, output: torch.Tensor) -> torch.Tensor:
        """v for this output: ones (0 where the output is NaN or infinite: the function is
        compared where it is defined), or --grad, which must be shaped like it."""
        if self.given is None:
            out = output.detach()  # (usually finite: one sum, no isfinite pass and cast)
            return torch.ones_like(out) if all_finite(out) else torch.isfinite(out).to(out.dtype)
        tensor = self.given.tensor
        if tuple(tensor.shape) != tuple(output.shape):
            raise UsageError(f"--grad has shape {shape_text(tensor.shape)} but the output has "
                             f"shape {shape_text(output.shape)}; they must be equal "
                             "(y.backward(v) needs v shaped like y)")
        return tensor.to(device=output.device, dtype=output.dtype)

    @classmethod
    def read(cls, options: Options) -> Upstream:
        """--grad as given (none: ones)."""
        if options.grad is None:
            return cls()
        return cls(value_of(options.grad, "--grad", options.seed, ":grad",
                            options.max_elements_total))


@dataclass(frozen=True)
class Bound:
    """The tensors of one run: how each input was made, the inputs in the run's dtype and
    device, the upstream (--grad or ones), and the named tangents (None: none given)."""

    values: dict[str, InputValue]
    cast: dict[str, torch.Tensor]
    upstream: Upstream
    tangent: dict[str, Any] | None
    dtype: torch.dtype
    device: torch.device
    constants: dict[str, InputValue] = field(default_factory=dict)  # --const, as held
    lean: bool = False  # float64 would not fit (evidence/fit.py): references in `dtype` too

    @property
    def chosen(self) -> list[str]:
        """The inputs whose values gradscope chose (nobody gave them)."""
        return [n for n, v in self.values.items() if v.chosen]

    @property
    def exact(self) -> dict[str, torch.Tensor]:
        """The inputs as the symbolic and finite-difference engines see them: in float64
        (`lean`: as the run has them)."""
        if self.lean:
            return dict(self.cast)
        return {n: t.to(torch.float64) for n, t in self.cast.items()}


def bind(options: Options, target: Any, upstream: Upstream | None = None) -> Bound:
    """The inputs of `target` from `options` (names checked against the target's first);
    `upstream`: the table's (default: --grad as the options give it)."""
    for name in [*options.at, *options.shape, *options.const]:
        if name not in target.names:
            target.adopt(name)  # (`labels=None` of a forward, given a value)
    names = target.names
    at = {**target.given, **options.at}
    data = {n: v for n, v in at.items() if isinstance(v, torch.Tensor)
            and not (v.is_floating_point() or v.is_complex())}
    if data:  # an integer or bool tensor given (class indices, a mask) is data, as --const
        at = {n: v for n, v in at.items() if n not in data}
        options = options.updated(const={**options.const, **data},
                                  at={n: v for n, v in options.at.items() if n not in data})
    tangent = _named_tangents(options.tangent, names)
    both = sorted(set(options.at) & set(options.shape))
    if both:
        raise UsageError(f"--at {both[0]} gives the value (and so the shape) of {both[0]}; "
                         f"--shape {both[0]} is for inputs drawn at random: give one of them")
    for option, other in (("--at", options.at), ("--shape", options.shape),
                          ("--tangent", tangent or {})):
        both = sorted(set(options.const) & set(other))
        if both:
            raise UsageError(f"--const {both[0]} makes {both[0]} data, never varied; "
                             f"{option} {both[0]} treats it as a variable: give one of them")
    for option, given in (("--at", at), ("--shape", options.shape), ("--tangent", tangent or {}),
                          ("--const", options.const),
                          ("--surrogate", dict.fromkeys(options.surrogates.names))):
        for name in given:
            if name != ANY_INPUT and name not in names:
                also = " (it is given by --arg too)" if name in options.arg else ""
                raise UnknownName(option, name, names, also)
    dtype, device = DTYPES[options.dtype], device_of(options.device)
    constants = {n: constant_of(v, n, options) for n, v in options.const.items()}
    if constants:
        _hold(target, constants, dtype, device)
        if not target.names:
            raise UsageError("every input is --const: nothing is left to differentiate")
    upstream = Upstream.read(options) if upstream is None else upstream
    values = _inputs(options, target, at, upstream.given)
    held = selected_out(options, tuple(values))
    if held:  # --only/--skip: the others are data, at the values they were given
        if len(held) == len(values):
            raise UsageError("--only/--skip leave no input or parameter to check; names are: "
                             + ", ".join(values))
        for name in held:
            value = values.pop(name)
            constants[name] = InputValue(value.tensor, "not checked (--only/--skip)")
        _hold(target, constants, dtype, device)
    cast = {n: v.tensor.to(device=device, dtype=dtype) for n, v in values.items()}
    for name, tensor in cast.items():
        if not all_finite(tensor):  # finite in float64 (checked when read), not in `dtype`
            raise UsageError(f"--at {name}: its values overflow {options.dtype} (largest "
                             f"finite {torch.finfo(dtype).max:g}); scale them or use a wider "
                             "--dtype")
    return Bound(values, cast, upstream, tangent, dtype, device, constants)


def selected_out(options: Options, names: tuple[str, ...]) -> list[str]:
    """The names --only/--skip leave out (globs over input and parameter names)."""
    if not options.only and not options.skip:
        return []
    for pattern in (*options.only, *options.skip):
        if not any(fnmatch.fnmatchcase(n, pattern) for n in names):
            raise UsageError(f"--only/--skip `{pattern}` matches no input or parameter; names "
                             f"are: {', '.join(names[:12])}{' …' if len(names) > 12 else ''}")
    def checked(name: str) -> bool:
        return (not options.only or any(fnmatch.fnmatchcase(name, p) for p in options.only)) \
            and not any(fnmatch.fnmatchcase(name, p) for p in options.skip)

    return [n for n in names if not checked(n)]


def _hold(target: Any, constants: Mapping[str, InputValue], dtype: torch.dtype,
          device: torch.device) -> None:
    """The target holds these inputs as data: floating ones in the check's dtype, integer
    and bool ones as they are."""
    target.hold({n: c.tensor.to(device=device, dtype=dtype if c.tensor.is_floating_point()
                                else c.tensor.dtype) for n, c in constants.items()})


def constant_of(raw: Any, name: str, options: Options) -> InputValue:
    """A --const value: built like --at; whole numbers become integers (class indices,
    token ids, masks), anything else stays floating."""
    if isinstance(raw, torch.Tensor) and not (raw.is_floating_point() or raw.is_complex()):
        if raw.numel() > options.max_elements_total:
            raise UsageError(f"--const {name}: {raw.numel():,} elements is more than the limit")
        return InputValue(raw.detach().cpu(), "given")
    value = value_of(raw, f"--const {name}", options.seed, name, options.max_elements_total)
    t = value.tensor
    if not isinstance(raw, torch.Tensor) and bool((t == torch.round(t)).all()):
        return InputValue(t.to(torch.int64), value.origin)
    return value


def _named_tangents(tangent: Mapping[str, Any] | None, names: tuple[str, ...]
                    ) -> dict[str, Any] | None:
    if tangent is None:
        return None
    tangent = dict(tangent)
    if ANY_INPUT in tangent:  # `--tangent VALUE` without a name: only for a single input
        if len(names) != 1:
            raise UsageError(f"the target has {len(names)} inputs ({', '.join(names)}); name "
                             "the tangent's input: --tangent NAME=VALUE")
        tangent = {names[0]: tangent.pop(ANY_INPUT)}
    return tangent


def device_of(name: str) -> torch.device:
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise UsageError(f"unknown --device {name!r}; allowed: cpu, cuda, cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda was asked for, but torch sees no CUDA GPU here "
                         f"(torch {torch.__version__}); use --device cpu")
    if device.type not in ("cpu", "cuda"):
        raise UsageError(f"unknown --device {name!r}; allowed: cpu, cuda, cuda:N")
    if device.type == "cuda" and device.index is not None \
            and device.index >= torch.cuda.device_count():
        raise UsageError(f"--device {name}: only {torch.cuda.device_count()} GPU(s) here")
    return device


def value_of(raw: Any, what: str, seed: int, name: str, limit: int = MAX_ELEMENTS
             ) -> InputValue:
    """A tensor, number, list or VALUE text → an InputValue (float64, on the CPU)."""
    if isinstance(raw, torch.Tensor):
        kind = _unsupported_kind(raw)
        if kind:
            raise UsageError(f"{what}: {kind} tensors are not supported; give a dense, "
                             "strided float tensor with values (e.g. .to_dense(), "
                             ".dequantize())")
        if raw.is_complex() or raw.dtype == torch.bool:
            raise UsageError(f"{what}: {raw.dtype} tensors are not supported; use float")
        if raw.numel() == 0:
            raise UsageError(f"{what}: an empty tensor has no gradient to check")
        if raw.numel() > limit:
            raise UsageError(f"{what}: {raw.numel():,} elements is more than the limit of "
                             f"{limit:,} (--max-elements-total)")
        t = raw.detach().to("cpu", torch.float64)
        if not all_finite(t):
            raise UsageError(f"{what}: NaN and infinity are not allowed in input values")
        return InputValue(t, "given")
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        raw = repr(float(raw))
    elif isinstance(raw, list | tuple):
        raw = repr(list(raw))
    if not isinstance(raw, str):
        raise UsageError(f"{what}: expected a tensor, number, list or VALUE text, got "
                         f"{type(raw).__name__}")
    return parse_value(raw, what, seed=seed, name=name, limit=limit)


def _unsupported_kind(t: torch.Tensor) -> str | None:
    if t.is_meta:
        return "meta (values-less)"
    if getattr(t, "is_nested", False):
        return "nested"
    if t.is_quantized:
        return "quantized"
    if t.layout != torch.strided:
        return f"{str(t.layout).removeprefix('torch.')} (sparse)"
    return None


# A module's parameters exist already (the user built the model): they are bounded by this many
# times --max-elements-total (10^9 elements by default, GPT-2 small's 124M well inside), a
# check holding a few float64 copies of them at most (docs/models.md, "Models at scale")
PARAMETER_FACTOR = 50


def _inputs(options: Options, target: Any, at: Mapping[str, Any], grad: InputValue | None
            ) -> dict[str, InputValue]:
    values: dict[str, InputValue] = {}
    total = held = 0
    limit = options.max_elements_total
    parameters = target.parameters
    # given values first: an elementwise expression's random inputs take their shape
    order = sorted(target.names, key=lambda n: n not in at and n not in parameters)
    for name in order:
        if name in at:
            value = value_of(at[name], f"--at {name}", options.seed, name, limit)
            raw = at[name]
            if isinstance(raw, torch.Tensor) and raw.dtype != DTYPES[options.dtype]:
                value = value.noted(f"a {str(raw.dtype).removeprefix('torch.')} tensor, "
                                    f"checked in {options.dtype} (dtype= to check it in its "
                                    "own)")
            if name in parameters and tuple(value.tensor.shape) != tuple(parameters[name].shape):
                raise UsageError(f"--at {name} has shape {shape_text(value.tensor.shape)} but the "
                                 f"parameter has shape {shape_text(parameters[name].shape)}")
        elif name in parameters:  # checked like a given tensor (complex ones are refused)
            value = _parameter(parameters[name], name, PARAMETER_FACTOR * limit)
        else:
            shape, why = _shape_of(name, options, target, values, grad)
            value = _distinct(tuple(shape), options, name, target.domain(name), limit, values)
            value = value.noted(why, chosen=True) if why else replace(value, chosen=True)
        if name in parameters and name not in at:
            held += value.tensor.numel()
        else:
            total += value.tensor.numel()
        if total > limit or held > PARAMETER_FACTOR * limit:
            what, count, most = ("inputs", total, limit) if total > limit else (
                "module parameters", held, PARAMETER_FACTOR * limit)
            raise UsageError(f"the {what} hold {count:,} elements together; the limit is "
                             f"{most:,} (--max-elements-total"
                             f"{f' × {PARAMETER_FACTOR}' if what != 'inputs' else ''})")
        values[name] = value
    return {n: values[n] for n in target.names}  # in the target's order again


def _parameter(param: torch.Tensor, name: str, limit: int) -> InputValue:
    """A module parameter as the run's value: the parameter itself (the module is converted
    to the check's dtype and device already), never a copy — each is the model again."""
    what = f"module parameter {name}"
    if _unsupported_kind(param) or not param.is_floating_point() or not 0 < param.numel() \
            <= limit or not all_finite(param):
        return value_of(param, what, 0, name, limit)  # (its one-line refusal)
    return InputValue(param.detach(), "module parameter")


def _distinct(shape: tuple[int, ...], options: Options, name: str,
              domain: tuple[float, float] | None, limit: int,
              chosen: Mapping[str, InputValue]) -> InputValue:
    """A chosen input's values, never the very values of another chosen one (x − y would be
    0, and a bug in it unseen): the seeded order of a short spread can coincide for two names
    (randperm(7) has 5,040 orders), and then the name's next seed is drawn (the origin says
    which)."""
    spread = SPREAD_HALF if options.dtype in HALF else SPREAD
    label = name
    for _ in range(8):
        value = random_value(shape, options.seed, label, domain, limit, spread)
        if not any(v.chosen and torch.equal(v.tensor, value.tensor) for v in chosen.values()):
            break
        label += "'"
    return value


# Inputs nobody shaped: more than a handful of elements, so that spread() values reach both
# sides of every branch (and a bug confined to one side shows)
DEFAULT_SHAPE = (25,)  # odd: an exact zero among the spread values
# ...and fewer in half precision, whose constant tolerances do not grow with the round-off a
# reduction over many elements accumulates (a 25-element log_softmax in bfloat16 is 0.2 off)
DEFAULT_SHAPE_HALF = (7,)
DEFAULTED = "default shape"  # in an origin: the input's shape was nobody's choice


def _shape_of(name: str, options: Options, target: Any, given: Mapping[str, InputValue],
              grad: InputValue | None) -> tuple[tuple[int, ...], str]:
    """The shape of a random input and, unless the user gave it, where it came from: what
    the target tells (a module's first layer), the shape of the other inputs of an
    elementwise expression or of --grad, else the default (3,)."""
    shape = options.shape.get(name, options.shape.get(ANY_INPUT))
    if shape is not None:
        return tuple(shape), ""
    told = target.suggested_shape(name)
    if told is not None:
        return told
    if target.is_elementwise:
        if grad is not None:
            return tuple(grad.tensor.shape), "the shape of --grad"
        siblings = [tuple(options.shape[n]) for n in options.shape if n != ANY_INPUT]
        siblings += [tuple(v.tensor.shape) for v in given.values()]
        if siblings:
            try:
                return tuple(torch.broadcast_shapes(*siblings)), "the shape of the other inputs"
            except RuntimeError:
                pass
    shape = DEFAULT_SHAPE_HALF if options.dtype in HALF else DEFAULT_SHAPE
    return shape, f"{DEFAULTED} {shape_text(shape)}: --shape {name}=… to change"


def defaulted(bound: Bound) -> list[str]:
    """The inputs whose shape was the default (for hints when the target then fails)."""
    return [n for n, v in bound.values.items() if DEFAULTED in v.origin]


def tangents_for(tangent: Mapping[str, Any] | None, leaves: Mapping[str, torch.Tensor],
                 seed: int) -> dict[str, torch.Tensor]:
    """Forward-mode directions in float64, one per input (zeros where none was named);
    a tangent that broadcasts to its input is expanded."""
    given = dict(tangent or {})
    out: dict[str, torch.Tensor] = {}
    for name, leaf in leaves.items():
        if name not in given:
            out[name] = torch.zeros(leaf.shape, dtype=torch.float64, device=leaf.device)
            continue
        t = value_of(given[name], f"--tangent {name}", seed, f":tangent:{name}").tensor
        if tuple(t.shape) != tuple(leaf.shape):
            try:
                t = t.expand(leaf.shape).clone()
            except RuntimeError:
                raise UsageError(f"--tangent {name} has shape {shape_text(t.shape)} but input "
                                 f"{name} has shape {shape_text(leaf.shape)}") from None
        out[name] = t.to(device=leaf.device)
    return out


def shape_text(shape: Any) -> str:
    dims = tuple(shape)
    return "() (a scalar)" if not dims else str(dims)
