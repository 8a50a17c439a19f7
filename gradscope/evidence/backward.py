"""autograd's side of the evidence: exactly `y.backward(v)` on the prepared target (a custom
backward torch refuses becomes a diagnostic, the user's own code raising is theirs), the
gradient-flow trace of that backward or of one more watched one, the determinism of user code's
forward, and the lowest precision the target computes in."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import torch

from gradscope.engines.autograd import AutogradEngine
from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.evidence import custom_backward, flow
from gradscope.evidence.prepare import Prepared
from gradscope.evidence.refused import at_chosen
from gradscope.report.model import Diagnostic
from gradscope.targets.base import without_graph
from gradscope.tensors import grad_nodes
from gradscope.usercode import OURS, backward_location, changed_in_place, user_code


@dataclass(frozen=True)
class Backward:
    """autograd's side: the engine, the upstream (as given: a hand-written backward gets its
    own copy, `after`, which shows whether it wrote into it), the gradients (None when
    backward failed, with `failure` saying how) and the gradient-flow trace."""

    engine: AutogradEngine
    upstream: torch.Tensor
    after: torch.Tensor
    grads: dict[str, torch.Tensor] | None
    failure: Diagnostic | None
    flow: flow.Flow | None
    notes: tuple[str, ...] = ()  # what stepped aside, and why
    # the coarsest floating dtype a tensor on the output's graph had (user code that casts
    # to float32 inside and back: its output alone looks float64); None: not watched
    lowest: torch.dtype | None = None
    # a fresh forward and backward of its own (the gradient-flow trace's), same upstream, gave
    # every gradient bit for bit: backward repeats (the determinism check needs no third run)
    repeated: bool = False
    # pairs of backward calls with one upstream whose answers differ (the flow trace's beside
    # the first, a probe's asked again): the determinism check judges them
    apart: tuple[custom_backward.CallsApart, ...] = ()


LOOPED_ROWS = 8  # a claim from one backward per output element: for ≥ 8 columns per row
DIAGONAL_SEED = 0xD1A6  # the two upstreams `diagonal` reads autograd's Jacobian with


def claimed(back: Backward) -> Callable[[str], torch.Tensor | None] | None:
    """Where autograd's Jacobian of each input is nonzero, computed on first use (None: its
    VJPs failed): finite differences share evaluations between the columns it calls disjoint
    and verify the claim as they go (engines/fd/grouped.py)."""
    if back.grads is None:
        return None
    memo: dict[str, dict[str, torch.Tensor] | None] = {}
    engine = back.engine

    def pattern(name: str) -> torch.Tensor | None:
        if "all" not in memo:
            # one backward per output element only where that is far cheaper than the two
            # evaluations per column it may save
            few = engine.output.numel() * LOOPED_ROWS <= engine.leaves[name].numel()
            try:
                memo["all"] = engine.nonzero(batched_only=not few)
            except GradscopeError:
                raise
            except Exception:  # (backward ran once already; its failures are judged there)
                memo["all"] = None
        found = memo["all"]
        return None if found is None else found.get(name)

    return pattern


class Diagonal:
    """Whether autograd's Jacobian of an input shaped like the output can be diagonal, read
    from two seeded upstreams v₁, v₂: Jᵀv₂ = d⊙v₂ with d = Jᵀv₁/v₁ (True where it cannot tell,
    and where backward is not linear in its upstream: no Jacobian at all, the comparison's
    business).
    Finite differences perturb all elements of an input at once only where their probe finds
    it elementwise — a probe that saturated points fool (a near one-hot sparsemax moves with
    nothing small) — and autograd, right or wrong, must not say otherwise.
    Its three backward calls count like any other: where their answers break linearity
    (Jᵀ(v₁+v₂) = Jᵀv₁ + Jᵀv₂, or a NaN where the first backward gave numbers), each is asked
    again, and pairs that differ are kept in `apart` for the determinism check."""

    def __init__(self, back: Backward) -> None:
        self.engine, self.table = back.engine, back.grads or {}
        self.memo: dict[str, Any] = {}
        self.apart: list[custom_backward.CallsApart] = []

    def __call__(self, name: str) -> bool:
        found = self._vjps()
        if found is None:
            return True
        (v1, v2), (g1, g2, g12) = found
        a, b, both = g1.get(name), g2.get(name), g12.get(name)
        if a is None or b is None or both is None or a.shape != self.engine.output.shape \
                or not _close(both, a + b):
            return True
        return _close(b, a / v1 * v2)

    def _vjps(self) -> Any:
        if "vjps" in self.memo:
            return self.memo["vjps"]
        out = self.engine.output
        gen = torch.Generator().manual_seed(DIAGONAL_SEED)
        ups = [((torch.rand(out.shape, generator=gen, dtype=torch.float64) + 0.5)
                * torch.where(torch.rand(out.shape, generator=gen) < 0.5, -1.0, 1.0))
               .to(out) for _ in range(2)]
        asked = [*ups, ups[0] + ups[1]]
        try:
            answers = [self.engine.vjp(u) for u in asked]
            if not self._kept(answers):
                labels = ("the diagonal probe's backward(v₁)", "its backward(v₂)",
                          "its backward(v₁ + v₂)")
                answers, apart = custom_backward.asked_again(
                    self.engine.vjp, list(zip(labels, asked, answers, strict=True)),
                    "the same upstream asked again")
                self.apart += apart
            self.memo["vjps"] = (ups, answers)
        except Exception:  # (backward ran once already; its failures are judged there)
            self.memo["vjps"] = None
        return self.memo["vjps"]

    def _kept(self, answers: list[dict[str, torch.Tensor]]) -> bool:
        """The three answers keep linearity, and are finite wherever the first backward's
        gradient is."""
        g1, g2, g12 = answers
        for name, both in g12.items():
            first = self.table.get(name)
            if first is not None and first.shape == both.shape and any(
                    bool((~torch.isfinite(g) & torch.isfinite(first)).any())
                    for g in (g1[name], g2[name], both)):
                return False
            if not _close(both, g1[name] + g2[name]):
                return False
        return True


def diagonal(back: Backward) -> Diagonal | None:
    """The diagonal probe of `back` (None: backward failed)."""
    return Diagonal(back) if back.grads is not None else None


def _close(got: torch.Tensor, expect: torch.Tensor) -> bool:
    """Equal up to round-off where both are finite."""
    known = torch.isfinite(expect) & torch.isfinite(got)
    floor = 1e-12 * float(torch.where(known, got.abs(), 0).max()) if got.numel() else 0.0
    off = (got - expect).abs() > 1e-8 * (got.abs() + expect.abs()) + floor
    return not bool((off & known).any())


def backward(prepared: Prepared) -> Backward:
    """Exactly y.backward(v); a custom backward that torch refuses becomes a diagnostic."""
    target, bound = prepared.target, prepared.bound
    source = target.flow_source()
    try:
        engine, tracer = _autograd(prepared, source)
    except TargetError as exc:
        raise at_chosen(exc, prepared) from exc.__cause__  # (the user's own exception)
    except UsageError as exc:
        raise switched_off(target) or exc from None
    if engine.output.numel() == 0:  # never a PASS of nothing
        raise UsageError(f"the output of {target.text} is empty (shape "
                         f"{tuple(engine.output.shape)}): there is no gradient to compare")
    _refuse_reentrant(engine.output, target.text)
    upstream = bound.upstream.tensor_for(engine.output)
    given = upstream.clone() if target.checks_backward else upstream
    failure = grads = None
    lowest: list[torch.dtype] = []
    try:
        with user_code("backward", lambda exc: changed_in_place(
                exc, lambda: engine.fresh_vjp(given.clone()))), \
                _coarsest(engine.output, lowest, not target.readable):
            try:
                grads = engine.backward(given)
            except (GradscopeError, SystemExit):
                raise
            except Exception as exc:  # torch's complaint about a custom backward
                failure = custom_backward.classify_failure(exc, target.text,
                                                           _backwards(engine.output))
                if failure is None:
                    raise
    finally:
        traced = tracer.finish() if tracer is not None else None
    return Backward(engine, upstream, given, grads, failure, traced,
                    lowest=lowest[0] if lowest else None)


@contextmanager
def _coarsest(output: torch.Tensor, found: list[torch.dtype], watch: bool) -> Iterator[None]:
    """While inside, hooks on every node of the output's graph note into `found` the
    coarsest floating dtype among the gradients backward passes (each is its tensor's dtype):
    the lowest precision the forward computed in on the way to the output. Only look."""
    top = getattr(output, "grad_fn", None)
    if not watch or top is None:
        yield
        return

    def seen(_inputs: Any, outputs: Any) -> None:
        for g in outputs:
            if isinstance(g, torch.Tensor) and g.is_floating_point() and (
                    not found or torch.finfo(g.dtype).eps > torch.finfo(found[0]).eps):
                found[:] = [g.dtype]

    handles = []
    try:
        for node in grad_nodes(top):
            if type(node).__name__ != "AccumulateGrad":  # (a leaf: its input's dtype)
                handles.append(node.register_hook(seen))
    except RuntimeError:  # (a node that takes no hook: the output's dtype stands)
        pass
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _backwards(output: torch.Tensor) -> dict[str, str]:
    """Each custom Function node on the graph, by its name, → its backward's label."""
    out = {}
    for node in grad_nodes(getattr(output, "grad_fn", None)):
        cls = getattr(node, "_forward_cls", None)
        if cls is not None:
            where = backward_location(cls)
            out[type(node).__name__] = f"{cls.__name__}.backward" + (f" ({where})" if where
                                                                     else "")
    return out


def switched_off(target: Any) -> TargetError | None:
    """Where the output has no graph because the target's code switched grad mode off and
    left it so (not the output's fault): the user's error, saying how to write it."""
    if not any("leaves grad mode off" in n for n in target.observed()):
        return None
    return TargetError(f"{target.text} switched grad mode off (torch.set_grad_enabled(False)) "
                       "inside its call, so its output has no graph to differentiate; use "
                       "`with torch.no_grad():` around the part that needs it",
                       during="forward", error="grad mode off")


def _refuse_reentrant(output: torch.Tensor, text: str) -> None:
    """Reentrant checkpointing (`checkpoint(..., use_reentrant=True)`) cannot be differentiated
    with `torch.autograd.grad`, which every gradient check takes: torch refuses it, so the way
    on is said here (exit 2), before anything is differentiated."""
    if any(type(node).__name__ == "CheckpointFunctionBackward"
           for node in grad_nodes(getattr(output, "grad_fn", None))):
        raise UsageError(f"{text} uses reentrant checkpointing (torch.utils.checkpoint with "
                         "use_reentrant=True), which torch cannot differentiate with "
                         "torch.autograd.grad, as every gradient check does: pass "
                         "use_reentrant=False (torch's recommended form) to check it")


def _autograd(prepared: Prepared, source: Any) -> tuple[AutogradEngine, flow.Tracer | None]:
    """The autograd engine and, where the target's own backward can be watched (an
    expression), the gradient-flow hooks on its graph: the user's `y.backward(v)` itself
    records the flow (the hooks only look), so no second forward and backward is needed."""
    target, cast = prepared.target, prepared.bound.cast
    if source is None or not source.watch_first or target.twin is not None:
        # code may write into its inputs: the leaves get their own storage then
        return AutogradEngine(target.autograd_forward, cast, copy=not target.readable,
                              shared=target.parameters, reinstate=target.reinstate), None
    seen: list[Any] = []

    def forward(values: Mapping[str, torch.Tensor]) -> torch.Tensor:
        seen.append(source.forward(values))
        return seen[-1].output

    engine = AutogradEngine(forward, cast, copy=False)  # torch ops never write into inputs
    engine.forward = target.forward  # later forward-mode calls need no source map
    return engine, flow.Tracer(seen[-1], engine.leaves,
                               keep_grads=prepared.options.intermediates)


def with_flow(prepared: Prepared, back: Backward) -> Backward:
    """User code's flow: one more forward and backward, watched in anomaly mode (file:line)."""
    source = prepared.target.flow_source()
    if back.flow is not None or back.grads is None or source is None or source.watch_first \
            or not prepared.target.watchable:
        return back
    if not prepared.request.explain_passing:  # (the flow explains; a caller that shows only
        return back  # failures asks again with explanations when a run fails)
    repeated: list[bool] = []
    apart: list[custom_backward.CallsApart] = []

    def compared(grads: dict[str, torch.Tensor | None]) -> None:
        # (where a run mode changed autograd's evaluation, it is not the one watched here)
        if prepared.target.twin is not None or back.grads is None \
                or set(grads) != set(back.grads):
            repeated.append(False)
            return
        found = custom_backward.CallsApart.of(
            "the first backward", "the gradient-flow trace's fresh forward and backward",
            back.grads, grads)
        repeated.append(found is None)
        apart.extend([found] if found is not None else [])

    try:
        traced = flow.trace(source.forward, prepared.bound.cast, back.upstream.clone(),
                            anomaly=source.anomaly, ours=OURS,
                            keep_grads=prepared.options.intermediates, seen_grads=compared)
    except TargetError as exc:  # (the watch, not the target: autograd's own run passed)
        why = str(exc).strip().splitlines()[-1][:160]
        return replace(back, notes=(*back.notes, "the gradient-flow trace stepped aside: the "
                                    f"target's code refused gradscope's watched forward "
                                    f"({why}); the verdict does not rest on it"))
    return replace(back, flow=traced, repeated=bool(repeated and repeated[0]),
                   apart=(*back.apart, *apart))


def base_value(prepared: Prepared, back: Backward, computed: torch.dtype
               ) -> tuple[torch.Tensor, torch.dtype]:
    """The output at the inputs as finite differences see it, and the precision their steps
    follow: autograd's own and `computed`, or where a run mode changed autograd's evaluation
    the target's own value (its twin's: the references' function), in the inputs' dtype."""
    twin = prepared.target.twin
    if twin is None:
        return back.engine.output, computed
    return without_graph(twin.forward, prepared.bound.cast), prepared.bound.dtype


def deterministic(prepared: Prepared, first: torch.Tensor) -> None:
    """Two evaluations of user code at the same inputs must agree, or finite differences
    measure noise (dropout in train mode, sampling): refused with what to do instead. `first`
    is autograd's own forward at these inputs; one more evaluation is compared with it."""
    target = prepared.target
    if not target.runs_user_code:
        return
    second = target.again(prepared.bound.cast)
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


def computed_in(prepared: Prepared, output: torch.Tensor,
                graph: torch.dtype | None = None) -> torch.dtype:
    """The lowest floating precision the target computes in: the check's dtype, or its
    output's when that is lower (a forward ending in `.float()` for float64 inputs), or the
    coarsest on its graph (`graph`: a step in float32 inside a float64 function). Where a run
    mode changed autograd's evaluation (its twin), the inputs' dtype: what the mode changed is
    measured element by element instead (roundoff.py), never the whole check widened."""
    dtype = prepared.bound.dtype
    if prepared.target.twin is not None:
        return dtype
    for lower in (output.dtype, graph):
        if lower is not None and lower.is_floating_point and \
                torch.finfo(lower).eps > torch.finfo(dtype).eps:
            dtype = lower
    return dtype


def precision_note(prepared: Prepared, computed: torch.dtype,
                   output: torch.Tensor | None = None) -> list[str]:
    dtype = prepared.bound.dtype
    if computed == dtype:
        return []
    name = str(computed).removeprefix("torch.")
    why = f"its output is {name} for {str(dtype)[6:]} inputs" \
        if output is None or output.dtype == computed else \
        f"a step of its forward does, between its {str(dtype)[6:]} inputs and its " \
        f"{str(output.dtype)[6:]} output"
    return [f"the target computes in {name} ({why}): tolerances and the finite-difference "
            f"step and round-off follow {name}"]
