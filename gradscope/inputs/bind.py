"""A command's request: its options, their validation, and the inputs it runs on.

The CLI, the config runner and the Python API all build a `Request`; `prepare` turns it into the
target and the tensors (every size bounded before anything is allocated), the first steps of
every command.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.inputs.text import MAX_ELEMENTS, Value, parse_value, random_value
from gradscope.targets.expression import SecondOrderTarget, resolve
from gradscope.tensors import all_finite

COMMANDS = ("check", "jvp", "jacobian")
FAIL_ON = ("mismatch", "warning", "never")
DTYPES = {"float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
          "bfloat16": torch.bfloat16}
MAX_DENSE_FD = 20_000  # default --max-fd: non-elementwise inputs past this are sampled
DEFAULT_SAMPLE = 1_000  # default --sample: elements given their own column when sampled


@dataclass
class Request:
    """Everything a command needs; the CLI and the Python API both build one."""

    command: str
    target: Any
    at: Mapping[str, Any] = field(default_factory=dict)
    positional: tuple[Any, ...] = ()  # API: a callable's arguments in order
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    default_shape: tuple[int, ...] | None = None
    grad: Any = None
    tangent: Mapping[str, Any] | None = None
    dtype: str = "float64"
    eps: float | None = None
    atol: float | None = None
    rtol: float | None = None
    seed: int = 0
    device: str = "cpu"
    fail_on: str = "mismatch"
    max_elements: int = 10_000
    full: bool = False
    args: Mapping[str, Any] = field(default_factory=dict)  # non-tensor arguments (Python)
    init: Mapping[str, Any] = field(default_factory=dict)  # nn.Module constructor arguments
    base: Path | None = None  # folder that relative file targets are resolved against
    repeat: int = 1  # jvp: backward calls whose .grad accumulates (seeds/003)
    order: int = 1  # 2: check double backward (the derivative of the VJP)
    intermediates: bool = False  # report the gradient of every intermediate tensor
    max_elements_total: int = MAX_ELEMENTS  # inputs, upstream and tangents, checked up front
    max_fd: int = MAX_DENSE_FD  # a non-elementwise input larger than this is sampled
    sample: int = DEFAULT_SAMPLE  # how many of its elements get their own column
    progress: Callable[[str, int], Callable[[int], None]] | None = None


def prepare(request: Request) -> tuple[Any, Value | None, dict[str, Value],
                                       dict[str, torch.Tensor]]:
    """The target, the --grad value, the inputs (how they were made) and the inputs cast to
    the run's dtype and device: the first steps of every command (run, graph, sweep).
    Fills in `request` (at from API positionals, a named tangent)."""
    target = resolve(request.target, args=request.args, init=request.init, base=request.base,
                     positional=request.positional)
    if getattr(target, "given", None):
        request.at = {**target.given, **request.at}
    if request.order == 2:
        inner = value_of(request.grad, "--grad", request.seed, ":grad").tensor \
            if request.grad is not None else None
        target = SecondOrderTarget(target, inner)
        request.grad = None  # --grad is the inner upstream; the outer one is ones
    check_names(request, target.names)
    dtype, device = DTYPES[request.dtype], device_of(request.device)
    grad_value = value_of(request.grad, "--grad", request.seed, ":grad",
                        request.max_elements_total) if request.grad is not None else None
    values = inputs_of(request, target, grad_value)
    cast = {n: v.tensor.to(device=device, dtype=dtype) for n, v in values.items()}
    return target, grad_value, values, cast


def validate(request: Request) -> None:
    if request.command not in COMMANDS:
        raise UsageError(f"unknown command {request.command!r}; commands: {', '.join(COMMANDS)}")
    if request.dtype not in DTYPES:
        raise UsageError(f"unknown dtype {request.dtype!r}; allowed: {', '.join(DTYPES)}")
    if request.fail_on not in FAIL_ON:
        raise UsageError(f"unknown --fail-on {request.fail_on!r}; allowed: "
                         + ", ".join(FAIL_ON))
    for option, value in (("--eps", request.eps), ("--atol", request.atol),
                          ("--rtol", request.rtol)):
        if value is not None and not (value == value and 0 <= value < float("inf")):
            raise UsageError(f"{option} must be a finite number >= 0, got {value}")
    if request.eps is not None and not 0 < request.eps <= 0.1:
        raise UsageError(f"--eps must be in (0, 0.1] (a relative step), got {request.eps}")
    if request.max_elements < 1:
        raise UsageError("--max-elements must be at least 1")
    if request.max_fd < 1 or request.sample < 1:
        raise UsageError("--max-fd and --sample must be at least 1")
    if request.max_elements_total < 1:
        raise UsageError("--max-elements-total must be at least 1")
    if request.order not in (1, 2):
        raise UsageError(f"--order must be 1 or 2, got {request.order}")
    if request.repeat < 1:
        raise UsageError("--repeat must be at least 1")


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


def check_names(request: Request, names: tuple[str, ...]) -> None:
    allowed = ", ".join(names)
    tangent = dict(request.tangent or {})
    if "*" in tangent:  # `--tangent VALUE` without a name: only for a single input
        if len(names) != 1:
            raise UsageError(f"the target has {len(names)} inputs ({allowed}); name the "
                             "tangent's input: --tangent NAME=VALUE")
        request.tangent = {names[0]: tangent.pop("*")}
    for option, given in (("--at", request.at), ("--shape", request.shapes),
                          ("--tangent", request.tangent or {})):
        for name in given:
            if name not in names:
                raise UsageError(f"{option} names `{name}`, which is not an input of the "
                                 f"target; inputs are: {allowed}")


def value_of(raw: Any, what: str, seed: int, name: str, limit: int = MAX_ELEMENTS) -> Value:
    if isinstance(raw, torch.Tensor):
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
        return Value(t, "given")
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        raw = repr(float(raw))
    elif isinstance(raw, list | tuple):
        raw = repr(list(raw))
    if not isinstance(raw, str):
        raise UsageError(f"{what}: expected a tensor, number, list or VALUE text, got "
                         f"{type(raw).__name__}")
    return parse_value(raw, what, seed=seed, name=name, limit=limit)


def inputs_of(request: Request, target: Any, grad: Value | None) -> dict[str, Value]:
    values: dict[str, Value] = {}
    total = 0
    parameters = getattr(target, "parameters", {})
    for name in target.names:
        limit = request.max_elements_total
        if name in request.at:
            value = value_of(request.at[name], f"--at {name}", request.seed, name, limit)
            if name in parameters and tuple(value.tensor.shape) != tuple(parameters[name].shape):
                raise UsageError(f"--at {name} has shape {shape_text(value.tensor.shape)} but the "
                                 f"parameter has shape {shape_text(parameters[name].shape)}")
        elif name in parameters:
            value = Value(parameters[name].detach().to("cpu", torch.float64), "module parameter")
        else:
            shape = request.shapes.get(name, request.default_shape)
            if shape is None:
                shape = tuple(grad.tensor.shape) if grad is not None and target.is_elementwise \
                    else (3,)
            value = random_value(tuple(shape), request.seed, name, target.domain(name), limit)
        total += value.tensor.numel()
        if total > limit:
            raise UsageError(f"the inputs hold {total:,} elements together; the limit is "
                             f"{limit:,} (--max-elements-total)")
        values[name] = value
    return values


def upstream_for(grad: Value | None, output: torch.Tensor) -> torch.Tensor:
    if grad is None:
        return torch.ones_like(output.detach())
    if tuple(grad.tensor.shape) != tuple(output.shape):
        raise UsageError(f"--grad has shape {shape_text(grad.tensor.shape)} but the output has "
                         f"shape {shape_text(output.shape)}; they must be equal "
                         "(y.backward(v) needs v shaped like y)")
    return grad.tensor.to(device=output.device, dtype=output.dtype)


def shape_text(shape: Any) -> str:
    dims = tuple(shape)
    return "() (a scalar)" if not dims else str(dims)
