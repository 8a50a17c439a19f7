"""The drop-in's judgement of the Jacobian: gradscope's own check, tight and dtype-aware, decides
first; where it finds a disagreement of precision alone (no NaN, kink or surrogate) and torch's
own gradcheck, as called, passes, the call passes with a `GradscopeWarning` naming what was
found (a constant factor, a transposed block), so every test green under torch stays green —
unless strict mode (`strict=True`, `pytest --gradscope-strict`, ini `gradscope_strict = true`,
`GRADSCOPE_STRICT=1`) makes gradscope's own verdict the call's.

Only precision can be excused so: a NaN, an element at a kink or jump, an undeclared surrogate,
an input nothing was compared for, a failing custom-backward check fail whatever the
tolerances. `fast_mode=True` compares one random projection vᵀJu from both sides first and
drills down to the per-element check only when it disagrees — or cannot tell — and, where
torch's gradcheck passes the call, only when that costs little (DRILL_BUDGET_S): a conv net's
every column is minutes where torch's one projection is milliseconds, and the projection's
own finding is said instead."""

# Long: one decision, taken in order over one report — tight or the call's tolerances, fast
# mode's projection, precision where torch passes, the probe, reentrancy, what was left
# unchecked; split, each step would pass the others' state along.

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.engines.fd.policy import DEFAULT_EPS, clamped
from gradscope.evidence.custom_backward import REPEATABILITY
from gradscope.report.headline import headline
from gradscope.report.model import Report
from gradscope.report.status import Status
from gradscope.testing import replay
from gradscope.testing.assertions import as_called, drop_in_failure
from gradscope.testing.call import GradcheckCall, label
from gradscope.testing.stats import STATS

# (torch.autograd.gradcheck, the attribute, is the function: the module is sys.modules')
_torch_gradcheck = sys.modules["torch.autograd.gradcheck"]
# torch's own functions, kept before any switch replaces them (the drop-in calls them itself)
TORCH_GRADCHECK = _torch_gradcheck.gradcheck
TORCH_DEFAULTS = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}
STRICT = (Status.MISMATCH, Status.UNDEFINED, Status.NONDIFFERENTIABLE, Status.INCONCLUSIVE)
PRECISION = ("mismatch", "check")  # failures a looser tolerance can answer
STRICT_ENV = "GRADSCOPE_STRICT"
FAST_SEED = 0x5EED
# Fast mode's per-element drill-down, where torch passes the call, only below this many
# seconds (estimated): past it the projection's finding is what is said
DRILL_BUDGET_S = 2.0


class GradcheckError(_torch_gradcheck.GradcheckError):
    """gradcheck failed; the message is gradscope's explanation, `report` the whole Report
    (None when a plumbing check failed)."""

    def __init__(self, message: str, report: Report | None = None) -> None:
        super().__init__(message)
        self.report = report


class GradscopeWarning(UserWarning):
    """gradcheck passed as torch's gradcheck judges the call, but gradscope's own check found a
    disagreement (strict mode fails it)."""


class Settings:
    """Process-wide defaults the pytest plugin sets (`--gradscope-strict`, the ini option)."""

    strict = False


def strict_mode(strict: bool | None) -> bool:
    """The call's `strict`, else the plugin's setting, else GRADSCOPE_STRICT."""
    if strict is not None:
        return strict
    env = os.environ.get(STRICT_ENV, "").strip().lower() in ("1", "true", "yes", "on")
    return Settings.strict or env


def options(call: GradcheckCall, kw: dict[str, Any], tight: bool) -> dict[str, Any]:
    """What gradscope's check runs with. `tight`: gradscope's own tolerances and step for the
    dtype, or the call's where those are tighter (a step other than torch's default is the
    call's); else the call's tolerances and step (torch's defaults where left) — a staircase
    of fine steps (round to 3 decimals) judged at the scale the call chose."""
    from gradscope.compare.tolerance import DEFAULT_TOLERANCES

    dtypes = {call.args[i].dtype for i in call.checked}
    dtype = str(dtypes.pop()).removeprefix("torch.") if len(dtypes) == 1 else "float64"
    out: dict[str, Any] = {"dtype": dtype, "fail_on": "mismatch", "nondet_tol": kw["nondet_tol"],
                           "device": str(call.args[call.checked[0]].device)}
    if kw["eps"] != TORCH_DEFAULTS["eps"] or not tight:  # judged by the call: its step too
        out["eps"] = clamped(kw["eps"])
    own = dict(zip(("rtol", "atol"), DEFAULT_TOLERANCES[dtype], strict=True))
    for key in ("atol", "rtol"):
        if not tight or kw[key] < own[key]:  # (tight: where the call asks for more)
            out[key] = kw[key]
    return out


def full(call: GradcheckCall, options: dict[str, Any],
         explain: Callable[[Report], bool] = lambda _: True) -> Report:
    """gradscope's check of the call. A passing call's report is never shown, so it is
    checked first without the analyses that only explain (the gradient-flow trace and its
    watched forward, inner Functions checked in place: a passing call then costs about what
    torch's own gradcheck does); a call that fails is checked again with them, and that
    report decides — unless `explain` says of the lean report that no explanation will be
    shown (a call that passes with a warning). Explanations never make a run pass or fail
    (the first rule), so the verdict is the full check's either way."""
    from dataclasses import replace

    from gradscope.api import request, run

    asked = replace(request("check", call.wrapped(), tuple(call.tensors()), options),
                    compare_all=True)  # (torch's slow mode compares every element)
    lean = run(replace(asked, explain_passing=False))
    return lean if lean.passed or not explain(lean) else run(asked)


@dataclass(frozen=True)
class Fast:
    """Fast mode's projection: agrees (True), disagrees beyond its own error bound (False,
    `found` saying by how much), or cannot tell (None: a kink crossed, a point func refused);
    `evaluation`: seconds the fastest evaluation of func took, to price the per-element check
    (the first one pays for warm-up: caches, lazy imports, a first kernel's set-up)."""

    agrees: bool | None
    found: str = ""
    evaluation: float = 0.0


def _fast_agrees(call: GradcheckCall, tight: dict[str, Any], loose: dict[str, Any],
                 costly: Callable[[float], bool] = lambda _: False) -> Fast:
    """vᵀ(J·u) by the finite-difference engine's directional derivative against (Jᵀv)·u by
    one backward, for seeded random u (over every checked element) and v (over every output
    element), within the tight tolerance. Where the projection over every input at once does
    not agree, each input is projected alone, as torch's fast mode does: a jump in one input
    (a ±1 label that requires grad) then spoils its own projection only. `costly`: whether
    the per-element check at that many seconds per evaluation is past its budget (torch's
    verdict then decides what the projection cannot)."""
    gen = torch.Generator().manual_seed(FAST_SEED)
    leaves = call.tensors()
    us = [torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x) for x in leaves]
    out, v, grads = call.random_vjp()  # the first forward's graph, one backward
    if not bool(torch.isfinite(out).all()):
        return Fast(None)
    parts = [float((g.double() * u.double()).sum()) if g is not None else 0.0
             for g, u in zip(grads, us, strict=True)]
    if not all(math.isfinite(p) for p in parts):
        return Fast(None)
    projection = _Projection(call, tight, loose, out.detach(), v.double(), costly)
    whole = projection.agrees(dict(zip(call.names, us, strict=True)), sum(parts))
    if whole or len(us) == 1:
        return Fast(whole, projection.found, projection.evaluation)
    alone = [projection.agrees({name: u}, part)
             for name, u, part in zip(call.names, us, parts, strict=True)]
    agrees = True if all(alone) else False if False in alone else None
    return Fast(agrees, projection.found, projection.evaluation)


class _Projection:
    """vᵀ(J·t) by finite differences along tangents t, judged against autograd's value.
    `found`: the last disagreement, said; `evaluation`: seconds per evaluation of func, the
    fastest step's (0 before any)."""

    def __init__(self, call: GradcheckCall, tight: dict[str, Any], loose: dict[str, Any],
                 base: torch.Tensor, v: torch.Tensor, costly: Callable[[float], bool]) -> None:
        self.call, self.tight, self.base, self.v, self.costly = call, tight, base, v, costly
        self.atol, self.rtol = _tolerance(tight)
        self.call_atol, self.call_rtol = _tolerance(loose)
        self.found, self.evaluation = "", 0.0

    def agrees(self, tangents: dict[str, torch.Tensor], ag: float) -> bool | None:
        """A two-point difference that agrees is accepted (its truncation error would have
        to cancel a bug to hide it), at the call's step or at one 100× smaller (which
        crosses 100× fewer kinks and has 10⁴× less truncation error: a large input moved at
        once crosses many). Where both disagree and agree with each other, that
        disagreement is no truncation error (it shrinks 10⁴× between them) and fails; else
        the difference is extrapolated from four points, and a four-point one that
        disagrees beyond its own error bound fails. A projection
        whose own error bound is a sizeable part of the call's tolerance cannot tell
        agreement from a bug (a sort whose order changes along t, a kink crossed): it
        decides nothing at that step, and if no step can decide, the elements do (None). (A
        bound below a hundredth of the call's tolerance hides only bugs 100× below what the
        call would ever fail.) Where the per-element check is too costly to follow, the
        four-point stage (twice the evaluations) runs only to confirm a two-point
        disagreement, at the smaller step alone; else torch's verdict decides."""
        base = self.tight.get("eps", DEFAULT_EPS)
        dtype = getattr(torch, self.tight["dtype"])
        steps = {eps: _differences(self.call, self.call.outputs, dtype, eps, self.base)
                 for eps in (base, base * 1e-2)}
        for points in (2, 4):
            tried = list(steps.values())
            if points == 4 and self.costly(self.evaluation):
                if not self.found:  # (nothing to confirm: torch's verdict decides)
                    return None
                tried = tried[-1:]  # (the smaller step's alone: fewer kinks crossed)
            apart = []  # (value, noise) of each step's decided two-point difference
            for fd in tried:
                along = self._along(fd, tangents, points)
                if along is None:
                    return None
                projected = float((self.v * along.value.double()).sum())
                if not math.isfinite(projected):
                    return None
                allowed = self.atol + self.rtol * abs(projected)
                noise = 3 * float((self.v.abs() * along.error.double()).sum())
                if noise > max(allowed, 0.01 * (self.call_atol
                                                + self.call_rtol * abs(projected))):
                    continue  # undecided at this step: the next one
                if abs(ag - projected) <= allowed + noise:
                    return True
                self.found = (f"the projection vᵀJu over {', '.join(tangents)} (seeded "
                              f"random u, v) is {ag:.6g} by autograd and {projected:.6g} "
                              f"± {noise:.2g} by finite differences")
                if points == 4:
                    return False
                apart.append((projected, noise, allowed))
            if len(apart) == 2 and _beyond_truncation(ag, *apart):
                return False
        return None

    def _along(self, fd: Any, tangents: dict[str, torch.Tensor], points: int) -> Any:
        """The directional derivative, and the seconds one evaluation took (None: func
        refused a point this step reaches — a check that its input is still a cube, every
        element moved at once — and the shortcut steps aside: the per-element check, which
        retries smaller steps element by element, decides)."""
        tic = time.perf_counter()
        try:
            with torch.no_grad():
                # (a bound too small only sends the call to the per-element check)
                along = fd.directional(tangents, measured_noise=False, points=points)
        except Exception:
            return None
        took = (time.perf_counter() - tic) / points
        self.evaluation = min(self.evaluation, took) if self.evaluation else took
        return along


def _beyond_truncation(ag: float, big: tuple[float, float, float],
                       small: tuple[float, float, float]) -> bool:
    """Two-point differences at steps h and h/100, each (value, noise, allowed), that agree
    with each other within both noises and the tolerance: on a smooth path their truncation
    errors are c·h² and c·h²/10⁴, so the smaller step's is below 10⁻⁴ of their gap, and
    autograd farther from it than the gap and that spread together is a disagreement no step
    would remove. Where they do not agree (kinks crossed along the path: an error of first
    order in the step, which can even grow as the step shrinks) they prove nothing."""
    (value, noise, _), (near, near_noise, allowed) = big, small
    spread, gap = allowed + noise + near_noise, abs(value - near)
    return gap <= spread and abs(ag - near) > spread + gap


def _differences(call: GradcheckCall, outputs: list[int], dtype: torch.dtype, eps: float,
                 base: torch.Tensor | None = None) -> Any:
    """The finite-difference engine over func's checked tensors (by name), outputs `outputs`;
    `base`: those outputs at the call's own values, known already (one forward fewer)."""
    from gradscope.engines.fd import FiniteDifferences

    fn = call.wrapped(outputs)
    names = call.names
    known = [base] if base is not None else []

    def traced(values):
        if known:  # (the engine's first evaluation is at the base values)
            return known.pop(), []
        return fn(*[values[n] for n in names]), []

    values = {n: t.detach() for n, t in zip(names, call.tensors(), strict=True)}
    return FiniteDifferences(traced, values, eps=clamped(eps), elementwise=set(), dtype=dtype)


def _tolerance(options: dict[str, Any]) -> tuple[float, float]:
    from gradscope.compare.tolerance import Tolerance

    tol = Tolerance.for_dtype(options["dtype"], options.get("rtol"), options.get("atol"))
    return tol.atol, tol.rtol


def _zero_jacobian(call: GradcheckCall, eps: float, atol: float) -> str | None:
    """No output is differentiable: gradcheck asserts the numerical Jacobian is zero."""
    if not call.float_outputs:
        return None
    fd = _differences(call, call.float_outputs, torch.float64, eps)
    names = call.names
    for name in names:
        est = fd.estimate(name)
        moving = est.partial.abs() > atol + 3 * est.error
        if bool(moving.any()):
            return (f"gradscope: gradcheck failed: no output requires grad, but the numerical "
                    f"Jacobian for {name} is not zero at {int(moving.sum())} entries (the "
                    "output moves with it): is a differentiable path cut (.detach(), "
                    "torch.no_grad, an integer cast)?")
    return None


def backward(call: GradcheckCall, kw: dict[str, Any], strict: bool) -> bool:
    """The Jacobian judged (module doc); GradcheckError when the call fails. True where
    torch's own gradcheck, as called, passed the call on the way (its plumbing checks
    with it)."""
    __tracebackhide__ = True
    tight = options(call, kw, tight=True)
    if not call.outputs:
        problem = _zero_jacobian(call, tight.get("eps", DEFAULT_EPS), _tolerance(tight)[0])
        if problem:
            raise GradcheckError(problem)
        return False
    loose = options(call, kw, tight=False)
    torch_passes = _TorchVerdict(kw, strict)
    if kw["fast_mode"] and _fast_decides(call, kw, (tight, loose), strict, torch_passes):
        return torch_passes.asked_and_passed
    # (a lean report that fails on precision alone, which torch passes, is not explained:
    # it passes with a warning; nor one that fails on precision and the linearity probe,
    # which the call's own tolerance decides below — an iterative solver's backward is
    # linear to its tolerance only, and explaining it costs its every inner call again)
    report = full(call, tight, lambda lean: not ((_precision(lean) or _probed(lean))
                                                 and torch_passes()))
    same = _tolerance(loose) == _tolerance(tight)
    judged_by = "strict" if strict else "call" if same else "any"
    problem = drop_in_failure(report, as_called(kw, tight["dtype"], judged_by), STRICT)
    if not problem:
        _reentrant(kw, report)
        # (strict or not: what gradscope did not compare, torch's gradcheck decides)
        _partly(call, kw, report, (lambda: _torch_accepts(kw)) if strict else torch_passes)
        return torch_passes.asked_and_passed
    if not strict and _probed(report) and torch_passes():
        # the linearity probe judges at the tolerance the evidence is judged at: at the
        # call's own, where torch passes, it may find nothing (a backward linear to 1e-6)
        judged = full(call, loose)  # (explained where it fails: its report is said)
        if all(f.kind in PRECISION for f in judged.failures):
            warn(call, kw, tight, headline(report) or "backward not linear in grad_output",
                 report)
            return torch_passes.asked_and_passed
        failing = drop_in_failure(judged, as_called(kw, loose["dtype"], "call"), STRICT)
        raise GradcheckError(failing or problem, judged)
    if strict or not _precision(report):
        raise GradcheckError(problem, report)
    # A disagreement in precision alone, where torch's own gradcheck as called passes: the
    # call passes, with gradscope's finding said (never worse than torch's gradcheck; strict
    # mode fails it). Its fast mode judges one projection, which a gradient off along a
    # direction the projection barely sees (a normalisation's statistics detached) passes.
    if torch_passes():
        warn(call, kw, tight, headline(report)
             or f"{report.mismatches} element(s) outside its tolerance", report)
        return torch_passes.asked_and_passed
    if same:
        raise GradcheckError(problem, report)
    judged = full(call, loose)  # (what fails at the call's own tolerances, said as such)
    failing = drop_in_failure(judged, as_called(kw, loose["dtype"], "call"), STRICT)
    raise GradcheckError(failing, judged) if failing else GradcheckError(problem, report)


def _fast_decides(call: GradcheckCall, kw: dict[str, Any],
                  tolerances: tuple[dict[str, Any], dict[str, Any]], strict: bool,
                  torch_passes: _TorchVerdict) -> bool:
    """Fast mode's projection decides the call where it agrees; and where the per-element
    check would cost far more than torch's whole gradcheck and torch's fast mode passes the
    call (replayed where it can be), torch's verdict stands, with what the projection found
    said. False: the per-element check decides."""
    tight, loose = tolerances

    def costly(evaluation: float) -> bool:
        return not strict and _drill_cost(call, evaluation) > DRILL_BUDGET_S

    fast = _fast_agrees(call, tight, loose, costly)
    if fast.agrees:
        return True
    if costly(fast.evaluation) and replay.torch_passes(call, kw, torch_passes):
        if fast.agrees is False:
            warn(call, kw, tight, fast.found)
        return True
    return False


def _reentrant(kw: dict[str, Any], report: Report) -> None:
    """Two backward calls that differ beyond nondet_tol fail the drop-in as they fail torch's
    gradcheck ("Backward is not reentrant"), even where both agree with the references (the
    check's own report calls that a warning): the contract the call was written against."""
    __tracebackhide__ = True
    found = next((d for d in report.diagnostics if d.kind == REPEATABILITY), None)
    if found is not None:
        raise GradcheckError(f"gradscope: gradcheck failed: backward is not reentrant beyond "
                             f"nondet_tol={kw['nondet_tol']:g}, as torch's gradcheck checks: "
                             f"{found.message}", report)


def _partly(call: GradcheckCall, kw: dict[str, Any], report: Report,
            torch_passes: Callable[[], bool]) -> None:
    """A pass that left elements unchecked (their Jacobian columns past what memory holds,
    an estimate no step made converge) is no full pass: torch's gradcheck, which compares
    every element, decides the call, and how many gradscope compared is said either way."""
    __tracebackhide__ = True
    total = sum(i.total for i in report.inputs)
    checked = sum(i.checked for i in report.inputs)
    if checked >= total:
        return
    said = (f"gradscope compared {checked:,} of {total:,} elements one by one (its report's "
            "notes say why not the others)")
    if not torch_passes():
        raise GradcheckError(f"gradscope: gradcheck failed: torch's gradcheck, which compares "
                             f"every element, fails the call; {said}", report)
    STATS.warned += 1
    warnings.warn(GradscopeWarning(f"gradscope: gradcheck of {label(call.func)} passes "
                                   f"with torch's gradcheck deciding the rest: {said}"),
                  stacklevel=4)


def _probed(report: Report) -> bool:
    """The report fails on precision and the linearity probe alone (which a looser
    tolerance may answer too: the probe is judged at the evidence's tolerance)."""
    kinds = {f.kind for f in report.failures}
    return "nonlinear_backward" in kinds and kinds <= {*PRECISION, "nonlinear_backward"}


def _precision(report: Report) -> bool:
    """The report fails on precision alone (what a looser tolerance can answer)."""
    return bool(report.failures) and all(f.kind in PRECISION for f in report.failures)


def _drill_cost(call: GradcheckCall, evaluation: float) -> float:
    """Seconds the per-element check would take, about, at `evaluation` seconds per
    evaluation of func: two per checked element and as many again refining those a
    comparison doubts."""
    return 4 * evaluation * sum(call.args[i].numel() for i in call.checked)


class _TorchVerdict:
    """Whether torch's own gradcheck passes the call, asked at most once (never in strict
    mode, where gradscope's verdict is the call's)."""

    def __init__(self, kw: dict[str, Any], strict: bool) -> None:
        self.kw, self.strict, self.answer = kw, strict, None

    @property
    def asked_and_passed(self) -> bool:
        """torch's own gradcheck was asked on the way and passed the call."""
        return self.answer is True

    def __call__(self) -> bool:
        if self.strict:
            return False
        if self.answer is None:
            self.answer = _torch_accepts(self.kw)
        return self.answer


def _torch_accepts(kw: dict[str, Any]) -> bool:
    """Whether torch's own gradcheck passes the call. Asked only where gradscope's own check
    fails on precision alone: the call then has torch's verdict (with gradscope's finding
    said). gradscope's finite differences carry an error bound, which at the call's step on
    a low-precision output (float32 out of float64 inputs, step 1e-6) is wide enough to take
    in a wrong gradient that torch's plain comparison rejects; and torch's fast mode judges
    one projection, which may pass what every element says."""
    try:
        # (grad mode as it was afterwards: a func may leave it off, and gradscope's own
        # check of the call's tolerances may run next)
        with torch.set_grad_enabled(torch.is_grad_enabled()):
            return bool(torch_gradcheck(kw, raise_exception=False))
    except Exception:  # (torch refusing or raising: no acceptance to lean on)
        return False


def torch_gradcheck(kw: dict[str, Any], **changed: Any) -> bool:
    """torch's own gradcheck on the call: the call's own arguments (`kw`, the drop-in's
    signature), with `changed` ones replaced."""
    args = {k: v for k, v in kw.items() if k not in ("func", "inputs", "strict")}
    return TORCH_GRADCHECK(kw["func"], kw["inputs"], **{**args, **changed})


def warn(call: GradcheckCall, kw: dict[str, Any], tight: dict[str, Any], found: str,
         report: Report | None = None) -> None:
    """A pass as torch's gradcheck judges the call that gradscope's own check disputes:
    said — with the size of the largest disagreement beside the gradient's, where a report
    has them, so that a solver's last digits and a 0.1 % bug do not read alike."""
    atol, rtol = _tolerance(tight)
    found += _size(report) if report is not None else ""
    mode = ", fast mode: one random projection" if kw["fast_mode"] else ""
    STATS.warned += 1
    warnings.warn(GradscopeWarning(
        f"gradscope: gradcheck of {label(call.func)} passes as torch's gradcheck judges it "
        f"(atol={kw['atol']:g}, rtol={kw['rtol']:g}{mode}), but gradscope's own check (atol "
        f"{atol:g}, rtol {rtol:g} for {tight['dtype']}) finds: {found}. strict=True (pytest "
        f"--gradscope-strict, {STRICT_ENV}=1) fails it"), stacklevel=4)


def _size(report: Report) -> str:
    """' (largest disagreement 3.1e-06, 2.4e-06 of the largest gradient entry)', or ''."""
    worst = max((i.max_abs_error for i in report.inputs
                 if math.isfinite(i.max_abs_error)), default=0.0)
    scale = max((i.grad_max_abs or 0.0 for i in report.inputs), default=0.0)
    if not worst:
        return ""
    tail = f", {worst / scale:.2g} of the largest gradient entry" if scale else ""
    return f" (largest disagreement {worst:.2g}{tail})"
