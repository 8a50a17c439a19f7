"""Python targets: load the user's code, call it the way they would, and keep its errors theirs.

A target is `path/to/file.py:NAME` or `package.module:NAME` (or, from the API, the object
itself): a `torch.autograd.Function` subclass (called through `.apply`), an `nn.Module` subclass
(instantiated with `--init` literals) or instance (its parameters become inputs with role
`parameter`), or a plain function of tensors. Tensor inputs are named after the forward's
parameters; non-tensor ones come from `--arg` literals (`ast.literal_eval`, never `eval`).
Whatever the user's code raises becomes a TargetError (exit 3) carrying the user's own frames
only, with a hint where the mistake is a known one.
"""

from __future__ import annotations

import copy
import inspect
import os
import traceback
import warnings
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gradscope.errors import TargetError, UsageError
from gradscope.targets.closures import Holder, batch_statistics, copied, holder, top_level
from gradscope.targets.functions import has_setup_context, old_style, values_only
from gradscope.targets.outputs import picked
from gradscope.targets.shapes import module_input_shape
from gradscope.targets.signature import OPEN, Param, signature

# frames that are not the user's: gradscope itself, torch, the import machinery
OURS = (str(Path(__file__).resolve().parents[1]), str(Path(torch.__file__).resolve().parent),
         "<frozen importlib", str(Path(inspect.__file__).resolve().parent))


def is_python_target(text: str) -> bool:
    """`file.py:NAME` or `package.module:NAME`."""
    head, sep, tail = text.strip().rpartition(":")
    return bool(sep) and bool(head) and tail.isidentifier() and (
        head.endswith(".py") or all(part.isidentifier() for part in head.split(".")))


# ---------------------------------------------------------------- errors of the user's code
def user_error(exc: BaseException, during: str, hint: str | None = None) -> TargetError:
    """A TargetError whose message shows the user's frames and the error, nothing of ours."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(OURS)]
    lines = [f"the target's own code raised during {during}:"]
    for frame in frames[-6:]:
        where = relative_path(frame.filename)
        lines.append(f'  File "{where}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    detail = str(exc).strip().splitlines()
    lines.append(f"{type(exc).__name__}: {detail[0] if detail else ''}".rstrip(": "))
    hint = hint or _known_hint(exc)
    if hint:
        lines.append(f"hint: {hint}")
    return TargetError("\n".join(lines))


def relative_path(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def _known_hint(exc: BaseException) -> str | None:
    text = str(exc)
    if "before Module.__init__() call" in text or "has no attribute '_parameters'" in text \
            or "has no attribute '_modules'" in text:
        return "did you call super().__init__() first in your nn.Module's __init__?"
    if "one of the variables needed for gradient computation has been modified" in text:
        return ("a tensor saved for backward was changed in place; clone it before changing "
                "it, or save a copy")
    return None


LEFT_HINT = ("the target called sys.exit() or raised SystemExit; gradscope counts a target "
             "that leaves as one that failed (a check must never pass because the code exited)")


@contextmanager
def user_code(during: str, hint: Callable[[BaseException], str | None] | None = None):
    """Run the user's code; anything it raises becomes a TargetError (exit 3), and so does
    leaving through sys.exit (SystemExit is no Exception, and would end gradscope with the
    user's exit code: 0 on a failing check)."""
    try:
        yield
    except (UsageError, TargetError):
        raise
    except SystemExit as exc:
        raise user_error(exc, during, LEFT_HINT) from exc
    except Exception as exc:
        raise user_error(exc, during, hint(exc) if hint else None) from exc


@contextmanager
def contained(during: str = "the check"):
    """Around a whole run: a SystemExit from user code that escaped the narrower `user_code`
    (raised in a custom backward, inside torch's autograd engine) is a TargetError too."""
    try:
        yield
    except SystemExit as exc:
        raise user_error(exc, during, LEFT_HINT) from exc


# ---------------------------------------------------------------- the target
@dataclass
class PythonTarget:
    """A user's Function, Module or function, with its tensor inputs named."""

    text: str
    obj: Any
    kind: str  # "autograd_function" | "module" | "function"
    params: list[Param]  # forward's parameters in order (ctx/self excluded)
    args: dict[str, Any]  # non-tensor arguments (--arg)
    module: torch.nn.Module | None = None
    parameters: dict[str, torch.Tensor] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    branch_sites: list = field(default_factory=list)
    given: dict[str, torch.Tensor] = field(default_factory=dict)  # API positional tensors
    traced_around: None = None  # user code: every point is evaluated in full
    constants: dict[str, torch.Tensor] = field(default_factory=dict)  # --const: data inputs
    output: int | str | None = None  # --output-index / --output-key: which output is checked
    owned: bool = False  # `module` is gradscope's own (a copy or an instance it built)
    functions: list[type] = field(default_factory=list)  # old-style Functions (functions.py)

    def hold(self, constants: Mapping[str, torch.Tensor]) -> None:
        """Make these inputs data (--const): passed as given, never differentiated."""
        self.constants = dict(constants)

    @property
    def target_kind(self) -> str:
        return self.kind

    @property
    def input_names(self) -> tuple[str, ...]:
        """Parameters without a default that are not --arg and not annotated as a number."""
        return tuple(p.name for p in self.params if p.name not in self.args
                     and p.name not in self.constants
                     and p.default is inspect.Parameter.empty and p.scalar is None)

    def guessed(self, given: set[str]) -> list[str]:
        """Notes for inputs made random tensors by guess: not annotated, not the first, and
        not given (`f(x, n)` with n forgotten in --arg still runs, on a tensor)."""
        unannotated = [p.name for p in self.params if p.name in self.input_names
                       and p.annotation is inspect.Parameter.empty]
        return [f"`{n}` has no annotation and was not given, so it got a random tensor; if it "
                f"is a number or a flag, pass --arg {n}=…" for n in unannotated[1:]
                if n not in given]

    @property
    def names(self) -> tuple[str, ...]:
        return self.input_names + tuple(n for n in self.parameters if n not in self.constants)

    def roles(self) -> dict[str, str]:
        return {n: ("parameter" if n in self.parameters else "input") for n in self.names}

    @property
    def elementwise_inputs(self) -> set[str]:
        return set()  # nothing is known of user code: one perturbation per element

    @property
    def is_elementwise(self) -> bool:
        return False

    def domain(self, name: str) -> tuple[float, float] | None:
        return None

    def convert(self, dtype: torch.dtype, device: torch.device | None = None) -> None:
        """Run on a copy of the module in the check's dtype (and on its device) when its
        parameters or buffers are in another (never the user's object; said once)."""
        if self.module is None:
            return
        tensors = [*self.module.parameters(), *self.module.buffers()]
        own = sorted({str(t.dtype).removeprefix("torch.") for t in tensors
                      if t.is_floating_point() and t.dtype != dtype})
        elsewhere = device is not None and any(
            t.device.type != device.type or (device.index is not None
                                             and t.device.index != device.index)
            for t in tensors)
        if not own and not elsewhere:
            return
        name = str(dtype).removeprefix("torch.")
        module = self._changeable(f"in {name}")
        with warnings.catch_warnings():  # torch's own note when a ScriptModule is converted
            warnings.simplefilter("ignore")
            module.to(device=device if elsewhere else None, dtype=dtype)
        self.take_parameters()
        where = f" on {device}" if elsewhere else ""
        self.notes.append(f"checked on a {name} copy of the module{where} (its own dtype: "
                          f"{', '.join(own) or name}); the module itself is not changed")

    def set_mode(self, mode: str | None) -> None:
        """--mode: check the modules in train or eval mode, on a copy when the user's own
        would change (said in the notes); None keeps each module's own mode."""
        if self.module is None:
            return
        training = mode == "train"
        if mode is None or all(m.training == training for m in self.module.modules()):
            self.notes += batch_statistics(self.module)
            return
        self._changeable(f"in {mode} mode").train(training)
        self.notes.append(f"modules checked in {mode} mode (--mode {mode}); your module is not "
                          "changed")
        self.notes += batch_statistics(self.module)

    def _changeable(self, how: str) -> torch.nn.Module:
        """The module, as gradscope's own copy (a function's modules were copied, an instance
        copied or built at the start; only a module that could not be copied is the user's)."""
        assert self.module is not None
        if not self.owned:
            try:
                self.module = copy.deepcopy(self.module)
            except Exception as exc:
                raise UsageError(f"{self.text} cannot be checked {how}: its module cannot be "
                                 f"copied ({type(exc).__name__}), and gradscope never changes "
                                 "yours") from None
            self.owned = True
            self.take_parameters()
        return self.module

    def take_parameters(self) -> None:
        """The module's trainable parameters, as the tensors finite differences perturb."""
        assert self.module is not None
        self.parameters = {n: p.detach() for n, p in self.module.named_parameters()
                           if p.requires_grad}

    def suggested_shape(self, name: str) -> tuple[tuple[int, ...], str] | None:
        """A module's first input shaped for its first layer (targets/shapes.py)."""
        first = self.input_names[0] if self.input_names else None
        return module_input_shape(self.module) if name == first else None

    def _call_args(self, values: Mapping[str, torch.Tensor]
                   ) -> tuple[list[Any], dict[str, Any]]:
        values = {**values, **self.constants}
        call: list[Any] = []
        named: dict[str, Any] = {}
        for p in self.params:
            if p.name in self.args:
                value = self.args[p.name]
            elif p.name in values:
                value = values[p.name]
            elif p.default is not inspect.Parameter.empty and not p.keyword:
                value = p.default
            else:
                continue
            if isinstance(value, torch.nn.Module) and isinstance(self.module, Holder):
                value = getattr(self.module, p.name, value)  # our copy, not the user's
            if p.keyword:
                named[p.name] = value
            else:
                call.append(value)
        return call, named

    def forward(self, values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        values = {**values, **self.constants} if self.constants else values
        args, kwargs = self._call_args(values)
        with user_code("forward", hint=self._forward_hint):
            if self.kind == "autograd_function":
                out = self.obj.apply(*args)
            elif self.module is not None:
                params = {n: values[n] for n in self.parameters}
                out = torch.func.functional_call(self.module, params, tuple(args), kwargs)
            else:
                out = self.obj(*args, **kwargs)
        return picked(out, self.text, self.output)

    def traced(self, values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list]:
        """Values for finite differences: old-style Functions run as their forward, so that
        the evaluation can be vmapped (targets/functions.py)."""
        with values_only(self.functions):
            return self.forward(values), []

    def learn_graph(self, output: torch.Tensor) -> None:
        """Find the old-style Functions in the graph of autograd's own evaluation."""
        self.functions = old_style(output)
        if self.functions and self.module is not None:  # a model: why it was fast after all
            names = ", ".join(sorted(c.__name__ for c in self.functions))
            self.notes.append(f"finite differences evaluate {names} (ctx in forward, which "
                              "vmap refuses) through forward itself, so that they are batched")

    def _forward_hint(self, exc: BaseException) -> str | None:
        known = _known_hint(exc)
        if known or len(self.input_names) < 2:
            return known
        # A non-tensor parameter left out of --arg arrives as a random tensor.
        return (f"gradscope passed tensors for {', '.join(self.input_names)}; give non-tensor "
                "parameters with --arg NAME=LITERAL (e.g. --arg n=2), or an object of the file "
                "by its name (--arg model=net)")


def build(obj: Any, text: str, args: Mapping[str, Any], init: Mapping[str, Any],
          positional: tuple[Any, ...] = ()) -> PythonTarget:
    """Wrap a loaded object as a PythonTarget; `positional` (API) are forward's arguments in
    order: tensors become inputs, anything else a non-tensor argument."""
    target = _build(obj, text, top_level(obj, args, text), init)
    if target.params and target.params[-1] is OPEN:  # *args: the arguments name themselves
        fixed = target.params[:-1]
        extra = max(0, len(positional) - len(fixed))
        if not fixed and not extra:
            raise UsageError(f"cannot read the parameters of {text}: call it from the Python "
                             "API with its arguments, or wrap it in a def with named ones")
        target.params = fixed + [Param(f"input{i}") for i in range(len(fixed),
                                                                    len(fixed) + extra)]
    params = [p for p in target.params if not p.keyword]
    if len(positional) > len(params):
        raise UsageError(f"{text} takes {len(params)} argument(s), got {len(positional)}")
    for param, value in zip(params, positional, strict=False):
        if isinstance(value, torch.Tensor):
            target.given[param.name] = value
        else:
            target.args[param.name] = value
    for param in params:
        if param.scalar and param.name not in target.args \
                and param.default is inspect.Parameter.empty:
            raise UsageError(f"{text}: `{param.name}` is annotated {param.scalar} and has no "
                             f"default; give it with --arg {param.name}=…")
    if target.kind == "function":  # modules it reaches or takes: their parameters too
        given = {n: v for n, v in target.args.items() if isinstance(v, torch.nn.Module)}
        held, note = holder(obj, given)
        if held is not None:
            target.module, target.owned = held, True
            target.take_parameters()
        target.notes += [note] if note else []
    return target


def _build(obj: Any, text: str, args: Mapping[str, Any], init: Mapping[str, Any]) -> PythonTarget:
    if inspect.isclass(obj) and issubclass(obj, torch.autograd.Function):
        params = signature(obj.forward, skip=0 if has_setup_context(obj) else 1, text=text)
        target = PythonTarget(text, obj, "autograd_function", params, dict(args))
    elif inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
        with user_code(f"{obj.__name__}({', '.join(f'{k}={v!r}' for k, v in init.items())})",
                       hint=lambda exc: _init_hint(obj, exc)):
            instance = obj(**init)
        target = _module_target(instance, text, args, built=True)
    elif isinstance(obj, torch.nn.Module):
        if init:
            raise UsageError(f"{text} is already an nn.Module instance; --init is for classes")
        target = _module_target(obj, text, args)
    elif callable(obj) and not inspect.isclass(obj):
        target = PythonTarget(text, obj, "function", signature(obj, 0, text), dict(args))
    else:
        raise UsageError(f"{text} is a {type(obj).__name__}; expected a torch.autograd.Function "
                         "subclass, an nn.Module (class or instance) or a function")
    if init and target.kind != "module":
        raise UsageError("--init gives constructor arguments to an nn.Module class only")
    known = {p.name for p in target.params}
    for name in args:
        if name not in known:
            raise UsageError(f"--arg names `{name}`, which is not a parameter of {text}; "
                             f"parameters: {', '.join(p.name for p in target.params) or 'none'}")
    return target


def _module_target(module: torch.nn.Module, text: str, args: Mapping[str, Any],
                   built: bool = False) -> PythonTarget:
    params = signature(module.forward, 0, text)
    # a copy: a forward in train mode updates buffers (batch norm's running statistics)
    own, note = (module, "") if built else copied(module)
    target = PythonTarget(text, module, "module", params, dict(args), module=own,
                          owned=built or own is not module, notes=[note] if note else [])
    target.take_parameters()
    if any(p.grad is not None for p in module.parameters()):
        target.notes.append("the module's parameters already held .grad; gradscope works on its "
                            "own copies, so those .grad values were neither used nor changed")
    return target


def _init_hint(cls: type, exc: BaseException) -> str | None:
    hint = _known_hint(exc)
    if hint:
        return hint
    try:
        source = inspect.getsource(cls.__init__)
    except (OSError, TypeError):
        return None
    if "super(" not in source and "Module.__init__" not in source:
        return ("did you call super().__init__()? an nn.Module's __init__ must call it before "
                "anything else")
    return None
