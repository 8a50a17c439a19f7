"""What every target made of the user's Python code shares: calling it the way the user would,
with its tensor inputs named after forward's parameters and its non-tensor ones from `--arg`;
the modules it holds (a module target's copy, or the modules a function reaches), checked on
gradscope's own copies; the output it picks; and the sandbox every call runs in.

The kinds themselves — `function.py` (torch.autograd.Function), `module.py` (nn.Module),
`plain.py` (a plain function) — say only how they are built and called.
"""

# Long: one class — every kind of user code is called, converted, switched, restored and
# sandboxed the same way, and --compile compiles that same call; split, the call the check
# makes and the one it compiles could drift apart.

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import torch

from gradscope.engines.autograd import AGREED_ULPS
from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.markers import marker_of, reference_of
from gradscope.targets import numbers
from gradscope.targets.base import FlowSource, Target, TracedFn, _last_line
from gradscope.targets.closures import (
    Holder,
    batch_statistics,
    batch_statistics_only,
    tracking_layers,
)
from gradscope.targets.held import Slots, holdable
from gradscope.targets.oldstyle import old_style, values_only
from gradscope.targets.outputs import picked
from gradscope.targets.registered import (
    WatchedHook,
    carry,
    deep_copy,
    hooks_by_name,
    parameters_once,
)
from gradscope.targets.shapes import module_input_shape
from gradscope.targets.signature import OPEN, Param
from gradscope.targets.state import State, state_of
from gradscope.tensors import as_given, compiled_inside, gap, own_copy, plain_value
from gradscope.usercode import known_hint, user_code


class CodeTarget(Target):
    """A user's Function, Module or function, with its tensor inputs named."""

    def __init__(self, text: str, kind: str, obj: Any, params: list[Param],
                 args: Mapping[str, Any]) -> None:
        super().__init__(text, kind)
        self.obj = obj
        self.params = params  # forward's parameters in order (ctx/self excluded)
        self.args = dict(args)  # non-tensor arguments (--arg)
        self.module: torch.nn.Module | None = None
        self.owned = False  # `module` is gradscope's own (a copy or an instance it built)
        self.output: int | str | None = None  # --output-index / --output-key
        self.parameter_hooks: dict[str, list[WatchedHook]] = {}
        self.adopted: set[str] = set()  # forward's parameters with a default an option gave
        self._state: State | None = None  # the module's own state before gradscope's calls
        self._compiled_inside = False  # autograd's graph showed torch.compile'd code
        self._slots: Slots | None = None  # the module's parameter slots, held by gradscope's

    # ------------------------------------------------------------ inputs
    @property
    def input_names(self) -> tuple[str, ...]:
        """Parameters without a default (or adopted) that are not --arg and not annotated as
        a number."""
        return tuple(p.name for p in self.params if p.name not in self.args
                     and p.name not in self.constants and p.scalar is None
                     and (p.default is inspect.Parameter.empty or p.name in self.adopted))

    def adopt(self, name: str) -> bool:
        """Make `name`, a parameter of forward with a default (`labels=None`,
        `attention_mask=None`), an input because an option gives it a value."""
        param = next((p for p in self.params if p.name == name), None)
        if param is None or param.default is inspect.Parameter.empty or param.scalar \
                or name in self.args:
            return False
        self.adopted.add(name)
        return True

    @property
    def names(self) -> tuple[str, ...]:
        return self.input_names + tuple(n for n in self.parameters if n not in self.constants)

    def guessed(self, given: set[str]) -> list[str]:
        """Notes for inputs made random tensors by guess: not annotated, not the first, and
        not given (`f(x, n)` with n forgotten in --arg still runs, on a tensor)."""
        unannotated = [p.name for p in self.params if p.name in self.input_names
                       and p.annotation is inspect.Parameter.empty]
        return [f"`{n}` has no annotation and was not given, so it got a random tensor; if it "
                f"is a number or a flag, pass --arg {n}=…" for n in unannotated[1:]
                if n not in given]

    def suggested_shape(self, name: str) -> tuple[tuple[int, ...], str] | None:
        """The first input shaped for the first layer of the module it holds (shapes.py)."""
        first = self.input_names[0] if self.input_names else None
        if self.module is None or name != first:
            return None
        return module_input_shape(self.module)

    @property
    def runs_user_code(self) -> bool:
        return True

    @property
    def checks_backward(self) -> bool:
        return True

    def marker(self) -> str | None:
        return marker_of(self.obj)

    def numbers(self) -> dict[str, float]:
        return {**numbers.given(self.args, self.params), **numbers.written(self.obj)}

    def surrogate_reference(self) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None:
        reference = reference_of(self.obj)
        if reference is None or self.module is not None:  # (a model's inputs are no call)
            return None

        def forward(values: Mapping[str, torch.Tensor]) -> torch.Tensor:
            values = {**values, **self.constants} if self.constants else values
            args, kwargs = self._call_args(values)
            with user_code("the surrogate's reference"):
                out = reference(*args, **kwargs)
            return picked(out, f"the reference of {self.text}", self.output)

        return forward

    def pick_output(self, choice: int | str) -> None:
        self.output = choice

    def bind_arguments(self, args: Mapping[str, Any], positional: tuple[Any, ...]) -> None:
        """--arg names must be forward's parameters; the API's positional arguments are
        forward's in order (tensors become inputs, anything else an argument); then the
        modules the code reaches are held."""
        known = {p.name for p in self.params}
        for name in args:
            if name not in known:
                raise UsageError(f"--arg names `{name}`, which is not a parameter of "
                                 f"{self.text}; parameters: "
                                 f"{', '.join(p.name for p in self.params) or 'none'}")
        self._bind_positional(positional)
        self.hold_modules()

    def _bind_positional(self, positional: tuple[Any, ...]) -> None:
        text = self.text
        if self.params and self.params[-1] is OPEN:  # *args: the arguments name themselves
            fixed = self.params[:-1]
            extra = max(0, len(positional) - len(fixed))
            if not fixed and not extra:
                raise UsageError(f"cannot read the parameters of {text}: call it from the "
                                 "Python API with its arguments, or wrap it in a def with "
                                 "named ones")
            self.params = fixed + [Param(f"input{i}") for i in range(len(fixed),
                                                                      len(fixed) + extra)]
        params = [p for p in self.params if not p.keyword]
        if len(positional) > len(params):
            raise UsageError(f"{text} takes {len(params)} argument(s), got {len(positional)}")
        for param, value in zip(params, positional, strict=False):
            if isinstance(value, torch.Tensor):
                self.given[param.name] = value
            else:
                self.args[param.name] = value
        for param in params:
            if param.scalar and param.name not in self.args \
                    and param.default is inspect.Parameter.empty:
                raise UsageError(f"{text}: `{param.name}` is annotated {param.scalar} and has "
                                 f"no default; give it with --arg {param.name}=…")

    def hold_modules(self) -> None:
        """Hold copies of the modules the code reaches, once its arguments are known."""

    # ------------------------------------------------------------ the modules it holds
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
            super().set_mode(mode)
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
                self.module = deep_copy(self.module)
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
        named, others = parameters_once(self.module)
        self.parameters = {n: p.detach() for n, p in named.items() if p.requires_grad}
        if self._slots is not None:
            self._slots.restore()
        self._slots = Slots(self.module, {n: others.get(n, []) for n in self.parameters})
        tied = [f"{n} is also {', '.join(o[:3])}" for n, o in others.items() if n in
                self.parameters]
        note = (f"tensors reached by several names are checked once, under the shortest "
                f"({'; '.join(tied[:4])}{'; …' if len(tied) > 4 else ''})")
        if tied and note not in self.notes:
            self.notes.append(note)
        # hooks on them registered in the user's code: registered again on the leaves autograd
        # differentiates (registered.py), as training runs them
        self.parameter_hooks: dict[str, list[WatchedHook]] = hooks_by_name(self.module, named)

    # ------------------------------------------------------------ calling it
    def _call_args(self, values: Mapping[str, torch.Tensor]
                   ) -> tuple[list[Any], dict[str, Any]]:
        call: list[Any] = []
        named: dict[str, Any] = {}
        for p in self.params:
            if p.name in self.args:
                value = self.args[p.name]
            elif p.name in values:
                value = as_given(values[p.name], self.given.get(p.name))
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
        self._calls += 1
        values = {**values, **self.constants} if self.constants else values
        args, kwargs = self._call_args({n: self._own(n, v) for n, v in values.items()})
        grad_mode = torch.is_grad_enabled()
        self._from_state()
        try:
            with user_code("forward", hint=self._forward_hint):
                if self.module is not None:
                    params = {n: values[n] for n in self.parameters}
                    if self.parameter_hooks:
                        carry(self.parameter_hooks, params)
                    out = self._held_call(params, args, kwargs)
                else:
                    out = self.call(args, kwargs)
        finally:
            self._after_call(grad_mode)
        return picked(out, self.text, self.output)

    def _own(self, name: str, value: torch.Tensor) -> torch.Tensor:
        """An input as the user's code receives it: a tensor of its own storage, since code
        may write into its inputs or free their memory until its backward restores them
        (reversible networks: `x.untyped_storage().resize_(0)`) — never gradscope's values
        themselves, nor its leaves: as in training, the code's input is no leaf of its own (a
        differentiable copy, whose node graphs look through). A module's parameters (held in
        its slots) and a Parameter the user passed are passed as they are."""
        if name in self.parameters or not isinstance(value, torch.Tensor) \
                or isinstance(self.given.get(name), torch.nn.Parameter) or not holdable(value):
            return value
        return own_copy(value)

    def _held_call(self, params: dict[str, torch.Tensor], args: list[Any],
                   kwargs: dict[str, Any]) -> Any:
        """The module called with `params` in its parameter slots, which hold them past the
        call (held.py: a backward that re-runs the module reads them); tensors that cannot
        stay (a batched one inside vmap) are swapped in for the call alone."""
        assert self.module is not None and self._slots is not None
        if all(holdable(t) for t in params.values()):
            before = self._slots.lent(params)
            out = self.module(*args, **kwargs)
            if _graphless(out):  # (no backward can re-run this call: held.py)
                self._slots.given_back(before)
            return out
        return torch.func.functional_call(self.module, params, tuple(args), kwargs)

    def reinstate(self, values: Mapping[str, torch.Tensor]) -> None:
        """The tensors autograd differentiates, put back in the module before a backward of
        the graph their forward made (another evaluation may have held others since)."""
        if self._slots is not None:
            self._slots.hold({n: values[n] for n in self.parameters if n in values})

    def _after_call(self, grad_mode: bool) -> None:
        """Grad mode, where the target's code switched it, restored (and said once)."""
        if torch.is_grad_enabled() != grad_mode:
            torch.set_grad_enabled(grad_mode)
            self._observed["grad mode"] = (
                f"{self.text} leaves grad mode {'off' if grad_mode else 'on'} "
                "(torch.set_grad_enabled) when it returns; gradscope restored it after each "
                "of its calls")

    def _from_state(self) -> None:
        """Every call starts from the state the module had before gradscope's first
        (targets/state.py): saved then, put back before each later call — not after one, so
        that the backward of a call still finds what its forward kept — and said once."""
        if self.module is None:
            return
        if self._state is None:
            self._state = state_of(self.module)
            return
        changed = self._state.restore()
        if changed and "state" not in self._observed:
            self._observed["state"] = (
                f"the module keeps state between calls ({', '.join(changed[:3])}); gradscope "
                "started every evaluation from the state it had before the check, and left "
                "it so")

    def finished(self) -> None:
        """The check is over: the module holds its own parameters again, in the state it had
        before the check."""
        if self._slots is not None:
            self._slots.restore()
        if self._state is not None:
            self._state.restore()

    def call(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """One call of the user's code with these arguments (no module held)."""
        return self.callee(*args, **kwargs)

    @property
    def callee(self) -> Callable[..., Any]:
        """What a call of the user's code calls (a Function's `apply`)."""
        return self.obj

    @property
    def ordinary_only(self) -> str | None:
        if not self.precompiled:
            return None
        return ("the target is already compiled (torch.compile): gradscope calls it only the "
                "plain way — grad mode, its inputs requiring grad, as torch's gradcheck does — "
                "so dynamo compiles it once, not once per mode (no_grad, vmap, watched "
                "forwards)")

    def again(self, values: Mapping[str, torch.Tensor],
              forward: Callable[[Mapping[str, torch.Tensor]], torch.Tensor] | None = None
              ) -> torch.Tensor:
        if self._compiled_inside:  # (every other mode would make dynamo compile it again)
            return plain_value(forward or self.autograd_forward, values)
        return super().again(values, forward)

    @property
    def precompiled(self) -> bool:
        # (what torch.compile returns, a function or an OptimizedModule, keeps the original
        # callable under this name; torch has no public test for it on 2.13. Looked up
        # statically, through wrappers that say what they wrap (`__wrapped__`: the drop-in's
        # own): a user's __getattr__ is never called for it)
        obj, seen = self.obj, set()
        while obj is not None and id(obj) not in seen:
            if inspect.getattr_static(obj, "_torchdynamo_orig_callable", None) is not None:
                return True
            seen.add(id(obj))
            obj = inspect.getattr_static(obj, "__wrapped__", None)
        return False

    def compiled(self, backend: Any) -> Callable[[Mapping[str, torch.Tensor]], torch.Tensor]:
        """The user's own object under torch.compile — the function, the Function's apply,
        the custom op, or the module (its parameters given by name, as the check's forward
        gives them) — called as an ordinary call makes it: no watchers, no stand-ins. A
        function that reaches modules is compiled itself, its copies' parameters swapped in
        outside the compiled frame (dynamo guards on what that frame reads)."""
        module = self.module
        if isinstance(module, Holder):
            run: Any = _Swapped(module, torch.compile(module.function, backend=backend))
            prefix = "held."
        elif module is not None:
            run, prefix = torch.compile(module, backend=backend), "_orig_mod."
        else:
            run, prefix = torch.compile(self.callee, backend=backend), ""

        def call(values: Mapping[str, torch.Tensor]) -> torch.Tensor:
            values = {**values, **self.constants} if self.constants else values
            args, kwargs = self._call_args(values)
            with user_code("the compiled forward (torch.compile)", hint=self._forward_hint):
                if module is not None:
                    params = {prefix + n: values[n] for n in self.parameters}
                    out = torch.func.functional_call(run, params, tuple(args), kwargs)
                else:
                    out = run(*args, **kwargs)
            return picked(out, self.text, self.output)

        return call

    def for_values(self, output: torch.Tensor) -> tuple[TracedFn, list[str]]:
        """Old-style Functions found in autograd's graph run as their forward, and train-mode
        normalisation layers leave their running statistics alone, while finite differences
        evaluate values, so that the evaluation can be vmapped (oldstyle.py, closures.py).
        Where the graph shows torch.compile'd code, every evaluation is an ordinary call (any
        other mode — no_grad, vmap, a watched forward — would make dynamo compile it again)."""
        if compiled_inside(output):
            self._compiled_inside = self._unbatched = True
            layers = tracking_layers(self.module)
            return (lambda values: (self._plain(values, layers), [])), [
                "the target calls torch.compile'd code: finite differences call it the plain "
                "way (grad mode, inputs requiring grad), so dynamo compiles it in one mode only"]
        classes, layers = old_style(output), tracking_layers(self.module)
        from gradscope.targets.custom_op import in_graph  # (it builds on this module)

        if in_graph(output):
            self._unbatched = True
        notes: list[str] = []
        plain: list[bool] = []  # (set once the shortcut raised where the plain way ran)
        proven: list[bool] = []  # (set once the shortcut agreed with the plain way)
        shortcut = bool(classes or layers)  # (without stand-ins the call is the plain one)

        def traced(values: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, list]:
            if not plain:
                try:
                    with values_only(classes), batch_statistics_only(layers):
                        out = self.forward(values)
                except TargetError as exc:
                    out = self._plain(values, layers)  # (raises where the target fails too)
                    plain.append(True)
                    notes.append("finite differences evaluate the target the plain way (grad "
                                 "mode, its inputs requiring grad, no stand-ins): without "
                                 f"them it raised ({_raised(exc)})")
                    return out, []
                if not shortcut or proven or not all(holdable(v) for v in values.values()):
                    return out, []
                return self._proven(out, values, layers, plain, proven, notes), []
            return self._plain(values, layers), []

        if classes and self.module is not None:  # a model: why it was fast after all
            names = ", ".join(sorted({c.__name__ for c in classes}))
            notes.append(f"finite differences evaluate {names} (ctx in forward, which vmap "
                         "refuses) through forward itself, so that they are batched")
        return traced, notes

    def _proven(self, out: torch.Tensor, values: Mapping[str, torch.Tensor], layers: Any,
                plain: list[bool], proven: list[bool], notes: list[str]) -> torch.Tensor:
        """The stand-ins' first value beside the plain way's at the same point: where they
        agree (within round-off) the stand-ins are proven for this check; where they do not,
        the plain way decides from here on, and a note says why."""
        alone = self._plain(values, layers)
        top, scale = gap(out, alone) if out.shape == alone.shape else (float("inf"), 1.0)
        if top <= AGREED_ULPS * torch.finfo(alone.dtype).eps * scale:
            proven.append(True)
            return out
        plain.append(True)
        notes.append(f"finite differences evaluate the target the plain way (grad mode, its "
                     f"inputs requiring grad, no stand-ins): with them it computed another value "
                     f"at the same point (by up to {top:.3g})")
        return alone

    def _plain(self, values: Mapping[str, torch.Tensor], layers: Any) -> torch.Tensor:
        """The target's value as an ordinary call makes it: in grad mode, its inputs leaves
        that require grad (code that registers a hook or differentiates inside its forward
        needs both); the running statistics still left alone."""
        with batch_statistics_only(layers):
            return plain_value(self.forward, values)

    def flow_source(self) -> FlowSource:
        from gradscope.targets.scopes import sourced  # the watched forward of a model

        return FlowSource(sourced(self.forward, self.module), anomaly=True)

    @property
    def watchable(self) -> bool:
        return not self._compiled_inside  # (a watched forward: dynamo would compile it again)

    def perturbed_failure(self, exc: BaseException) -> str:
        """The user's code failing at a perturbed point is the target's; anything else that
        escaped finite differences is gradscope's own and is never blamed on the user."""
        if isinstance(exc, GradscopeError):
            return super().perturbed_failure(exc)
        return (f"gradscope's finite differences failed (an internal error, not the target's: "
                f"{type(exc).__name__}: {_last_line(exc)}; please report it)")

    def _forward_hint(self, exc: BaseException) -> str | None:
        known = known_hint(exc)
        drawn = [n for n in self.input_names if n not in self.stated and n not in self.given]
        if known or len(self.input_names) < 2 or not drawn:
            return known
        # A non-tensor parameter left out of --arg arrives as a random tensor (one the user
        # gave a value or a shape is a tensor they meant).
        return (f"gradscope passed tensors for {', '.join(drawn)}; give non-tensor "
                "parameters with --arg NAME=LITERAL (e.g. --arg n=2), or an object of the file "
                "by its name (--arg model=net)")


class _Swapped(torch.nn.Module):
    """A Holder's copies as submodules (`held.…`, where functional_call swaps their
    parameters) and the compiled function as forward."""

    def __init__(self, held: Holder, run: Callable[..., Any]) -> None:
        super().__init__()
        self.held, self.run = held, run

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)


def _raised(exc: TargetError) -> str:
    """What the user's code raised under a shortcut, in one short line (its own exception, not
    gradscope's hint about the call, which the shortcut and not the user made)."""
    cause = exc.__cause__ or exc
    first = str(cause).strip().splitlines()[0] if str(cause).strip() else ""
    return f"{type(cause).__name__}: {first}"[:120]


def _graphless(out: Any) -> bool:
    """Whether a call's result holds no autograd graph: tensors (in tuples, lists and dicts)
    none of which requires grad, and plain values. Any other object may hold a graph."""
    if isinstance(out, torch.Tensor):
        return not out.requires_grad
    if isinstance(out, tuple | list):
        return all(_graphless(item) for item in out)
    if type(out) is dict:
        return all(_graphless(item) for item in out.values())
    return out is None or isinstance(out, int | float | bool | str)
