"""The three engines run on one target: autograd's backward (with its gradient-flow trace for
expressions), the symbolic engine (or why it was skipped), and finite differences for every
input (per element, or sampled past the budget), each step returning a typed result."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.diagnose import custom_backward, flow
from gradscope.engines.autograd import AutogradEngine
from gradscope.engines.fd import Estimate, FiniteDifferences
from gradscope.engines.fd.budget import sample_size, sampled_note
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.errors import TargetError, UsageError
from gradscope.inputs.bind import Bound, upstream_for
from gradscope.inputs.text import seed_for
from gradscope.options import Options
from gradscope.report.model import Diagnostic
from gradscope.targets import ExpressionTarget, SecondOrderTarget
from gradscope.targets.python import LEFT_HINT, user_error
from gradscope.verdict.checks import PROJECTIONS
from gradscope.verdict.tolerance import DEFAULT_EPS


@dataclass
class Backward:
    """autograd's side: the engine, the upstream, the gradients (None when backward failed,
    with `failure` saying how), and the flow trace recorded on the way (expressions)."""

    engine: AutogradEngine
    upstream: torch.Tensor
    before: torch.Tensor  # a copy of the upstream, to see whether backward wrote into it
    grads: dict[str, torch.Tensor] | None
    failure: Diagnostic | None
    flow: Any


@dataclass
class Symbolic:
    engine: SymbolicEngine | None
    skipped: str | None  # why there is no symbolic column
    grads: dict[str, torch.Tensor] | None  # its VJP for the upstream


@dataclass
class Differences:
    fd: FiniteDifferences
    estimates: dict[str, Estimate | None]
    skipped: dict[str, str] = field(default_factory=dict)  # input → why none
    notes: list[str] = field(default_factory=list)


def deterministic(target: Any, bound: Bound, first: torch.Tensor) -> None:
    """Two evaluations of user code at the same inputs must agree, or finite differences
    measure noise (dropout in train mode, sampling): refused with what to do instead. `first`
    is autograd's own forward at these inputs; one more evaluation is compared with it."""
    if target.kind == "expression":
        return
    with torch.no_grad():
        second = target.forward(dict(bound.cast))
    if not (isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor)) \
            or first.shape != second.shape or not first.is_floating_point():
        return
    a, b = first.detach().to(torch.float64), second.detach().to(torch.float64)
    both = torch.isfinite(a) & torch.isfinite(b)
    if not bool(both.any()):
        return
    gap = float((a[both] - b[both]).abs().max())
    scale = max(float(a[both].abs().max()), 1.0)
    if gap > 1e3 * torch.finfo(first.dtype).eps * scale:
        raise UsageError(
            f"{target.text} is random: two evaluations at the same inputs differ (by up to "
            f"{gap:.3g}), so finite differences would measure the noise. Check it in eval "
            "mode (--eval: dropout off), or seed or remove the randomness inside it")


def autograd(target: Any, bound: Bound, keep_grads: bool) -> Backward:
    """Exactly y.backward(v); a custom backward that torch refuses becomes a diagnostic."""
    engine, tracer = _engine(target, bound.cast, keep_grads)
    upstream = upstream_for(bound.grad, engine.output)
    python = target.kind != "expression" and not isinstance(target, SecondOrderTarget)
    before = upstream.clone() if python else upstream
    failure = grads = None
    try:
        grads = engine.backward(upstream)
    except (UsageError, TargetError):
        raise
    except SystemExit as exc:  # sys.exit in a custom backward: a failure, never an exit
        raise user_error(exc, "backward", LEFT_HINT) from exc
    except Exception as exc:  # torch's complaint about a custom backward, or the user's raise
        failure = custom_backward.classify_failure(exc, target.text)
        if failure is None:
            raise user_error(exc, "backward") from None
    finally:
        traced = tracer.finish() if tracer is not None else None
    return Backward(engine, upstream, before, grads, failure, traced)


def _engine(target: Any, cast: Mapping[str, torch.Tensor], keep_grads: bool
            ) -> tuple[AutogradEngine, flow.Tracer | None]:
    """The autograd engine, and for an expression the gradient-flow hooks on its graph: the
    user's `y.backward(v)` itself records the flow (the hooks only look), so no second
    forward and backward is needed."""
    if not isinstance(target, ExpressionTarget):
        return AutogradEngine(target.forward, cast), None
    seen: list[flow.Sourced] = []

    def forward(values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        seen.append(target.sourced(values))
        return seen[-1].output

    engine = AutogradEngine(forward, cast, copy=False)  # torch ops never write into inputs
    engine.forward = target.forward  # later forward-mode calls need no source map
    return engine, flow.Tracer(seen[-1], engine.leaves, keep_grads=keep_grads)


def symbolic(target: Any, exact: Mapping[str, torch.Tensor], upstream: torch.Tensor
             ) -> Symbolic:
    """The symbolic engine, the reason it was skipped, and its VJP for the upstream."""
    if isinstance(target, SecondOrderTarget):
        return Symbolic(None, "--order 2 differentiates torch's own first-order VJP, which has "
                        "no symbolic form (autograd is compared with finite differences)", None)
    if not isinstance(target, ExpressionTarget):
        return Symbolic(None, "Python code has no symbolic form (autograd is compared with "
                        "finite differences)", None)
    out_shape = tuple(upstream.shape)
    try:
        held = {n: c.detach() for n, c in target.constants.items()}
        engine = SymbolicEngine(target.expression, {**exact, **held},
                                constants=frozenset(held))
        if tuple(engine.output.shape) != out_shape:
            return Symbolic(None, f"the symbolic output has shape {tuple(engine.output.shape)}, "
                            f"torch's {out_shape}", None)
        # the VJP now, so that a failure shows here as a skip, not later as a crash
        return Symbolic(engine, None, engine.vjp(upstream.to(torch.float64)))
    except UsageError:
        raise
    except Exception as exc:  # the other two engines still give a verdict
        first = str(exc).splitlines()[0][:120] if str(exc) else ""
        return Symbolic(None, f"sympy could not handle this expression ({type(exc).__name__}: "
                        f"{first})", None)


def computed_in(bound: Bound, backward: Backward) -> torch.dtype:
    """The lowest floating precision the target computes in: the check's dtype, or its
    output's when that is lower (a forward ending in `.float()` for float64 inputs)."""
    out = backward.engine.output.dtype
    if out.is_floating_point and torch.finfo(out).eps > torch.finfo(bound.dtype).eps:
        return out
    return bound.dtype


def precision_note(bound: Bound, computed: torch.dtype) -> list[str]:
    if computed == bound.dtype:
        return []
    name = str(computed).removeprefix("torch.")
    return [f"the target computes in {name} (its output is {name} for {str(bound.dtype)[6:]} "
            f"inputs): tolerances and the finite-difference step and round-off follow {name}"]


def finite_differences(target: Any, bound: Bound, options: Options,
                       progress: Callable[[str, int], Any] | None,
                       computed: torch.dtype | None = None) -> Differences:
    """Estimates for every input: each element, or a seeded sample past the budget.
    `computed`: the lowest precision the target computes in (None: the check's dtype)."""
    result = _engine_fd(target, bound, options, computed or bound.dtype)
    fd = result.fd
    sampled: list[str] = []  # notes on sampled inputs come after the others
    for name in target.names:
        try:
            count = sample_size(fd, name, options.max_fd, options.sample)
            todo = fd.values[name].numel() if count is None else count
            fd.progress = progress(f"finite differences for {name}", todo) \
                if progress and not fd.is_elementwise(name) else None
            if count is None:
                result.estimates[name] = fd.estimate(name)
                if name in fd.probed and fd.is_elementwise(name):
                    result.notes.append(
                        f"finite differences: the target is elementwise in {name} (each output "
                        f"element moves with its own element of {name} only: {fd.probed[name]} "
                        "probing calls showed it), so all its elements were perturbed at once")
                continue
            result.estimates[name] = fd.sampled(name, count,
                                                seed_for(options.seed, f":sample:{name}"))
        except (TargetError, UsageError, RuntimeError) as exc:
            # e.g. the user's forward fails at a perturbed point: the other engines still judge
            # (and an input left with nothing compared is `inconclusive`, never a pass)
            result.estimates[name] = None
            result.skipped[name] = _fd_failure(target, exc)
            continue
        others = "the symbolic engine covers every element, " \
            if isinstance(target, ExpressionTarget) else "the others are `unchecked`, "
        sampled.append(sampled_note(name, count, fd.values[name].numel(), options.sample,
                                    options.max_fd, fd.flops(), others, PROJECTIONS))
    result.notes += sampled
    return result


def _fd_failure(target: Any, exc: BaseException) -> str:
    """Why finite differences failed: the target at a perturbed point, or, for Python code
    whose own errors arrive as TargetError, a failure of gradscope's that is not blamed on
    the user's code."""
    last = str(exc).strip().splitlines()[-1][:160] if str(exc).strip() else type(exc).__name__
    inner = getattr(target, "base", target)  # --order 2 wraps the target
    if isinstance(inner, ExpressionTarget) or isinstance(exc, TargetError | UsageError):
        return f"the target failed at a perturbed point: {last}"
    return (f"gradscope's finite differences failed (an internal error, not the target's: "
            f"{type(exc).__name__}: {last}; please report it)")


def _engine_fd(target: Any, bound: Bound, options: Options, computed: torch.dtype
                ) -> Differences:
    """Finite differences in float64; in the run's dtype when the target cannot take float64.
    A target computing in a lower precision gets a step that suits it (eps^(1/3))."""
    lower = computed != torch.float64 and computed != bound.dtype
    eps = options.eps or (float(torch.finfo(computed).eps) ** (1 / 3) if lower else DEFAULT_EPS)
    exact = bound.exact
    probe = not isinstance(target, ExpressionTarget)  # an expression declares its structure
    around = target.traced_around
    try:
        return Differences(FiniteDifferences(target.traced, exact, eps=eps, around=around,
                                             elementwise=target.elementwise_inputs,
                                             probe=probe,
                                             round_off=computed if lower else None), {})
    except (UsageError, TargetError) as exc:
        if bound.dtype == torch.float64:
            raise
        first = str(exc).splitlines()[-1]
        low_eps = options.eps or float(torch.finfo(bound.dtype).eps) ** (1 / 3)
        fd = FiniteDifferences(target.traced, {n: t.to(bound.dtype) for n, t in exact.items()},
                               elementwise=target.elementwise_inputs, eps=low_eps,
                               dtype=bound.dtype, around=around, probe=probe)
        return Differences(fd, {}, notes=[
            f"finite differences ran in {options.dtype} (eps {low_eps:.3g}): the target failed "
            f"in float64 ({first})"])
