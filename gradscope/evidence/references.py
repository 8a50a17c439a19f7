"""The reference engines a run lays beside autograd, each behind one adapter: how it starts on
a prepared run, its answers (the VJP for an upstream, the Jacobian, J·t) as `Answer`s, why it
has none for an input, and — finite differences — how doubted estimates are refined into a new
reference. A new engine is its module in `engines/`, one adapter here, and one line in
`REFERENCES`; the comparison, the report's columns and every renderer follow from the name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from gradscope.engines.base import Answer
from gradscope.engines.fd import Estimate, FiniteDifferences
from gradscope.engines.fd.budget import at_scale, sample_size, sampled_note
from gradscope.engines.fd.policy import MAX_EPS, eps_for, low_precision_eps
from gradscope.engines.fd.stencil import REFINE_FACTOR, REFINE_ROUNDS, WIDEN_FACTOR, WIDEN_ROUNDS
from gradscope.engines.symbolic import SymbolicEngine
from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.evidence.prepare import Prepared
from gradscope.rng import seed_for
from gradscope.targets.base import SymbolicForm, TracedFn

PROJECTIONS = 3  # random projections over every element of a sampled input


@dataclass(frozen=True)
class Setup:
    """What an engine starts from: the prepared run, autograd's output and the table's
    upstream, the traced function finite differences evaluate, the lowest precision the target
    computes in, the references started before it, and a progress reporter."""

    prepared: Prepared
    output: torch.Tensor
    upstream: torch.Tensor
    for_values: TracedFn
    computed: torch.dtype
    before: tuple[Reference, ...] = ()
    progress: Callable[[str, int], Any] | None = None
    # where autograd's Jacobian of an input is nonzero (finite differences group columns by it)
    claimed: Callable[[str], torch.Tensor | None] | None = None
    # whether autograd's Jacobian of an input can be diagonal (an elementwise probe must agree)
    diagonal: Callable[[str], bool] | None = None


@dataclass(frozen=True)
class Reference:
    """One reference engine's side of a run. `exact`: its answers carry no error (preferred
    for the extra upstreams, where an estimate adds only noise); `skipped`: input → why it has
    no answer for it; `notes`: for the report's header (`said()`, which a reference may derive
    from what it holds); `closing`: said at the end."""

    name: str
    label: str = ""  # the column's heading in a table
    exact: bool = False
    skipped: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    closing: tuple[str, ...] = ()

    @property
    def ran(self) -> bool:
        """Whether it answers anything at all."""
        return False

    def said(self) -> tuple[str, ...]:
        """Its notes for the report's header, as its answers stand."""
        return self.notes

    @property
    def answers_all(self) -> bool:
        """It should answer every input: an input it skipped is a failure to report (finite
        differences), not an engine that does not apply (no symbolic form)."""
        return False

    def vjp(self, v: torch.Tensor, ones: bool = False) -> dict[str, Answer]:
        return {}

    def jacobian(self, out_shape: tuple[int, ...]) -> dict[str, Answer]:
        return {}

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> Answer | None:
        return None

    def mode(self, name: str) -> str | None:
        return None

    def kink(self, name: str) -> torch.Tensor | None:
        """Input-shaped: where the forward itself has a kink, jump or pole near the input
        (an estimating engine sees it; None: this engine cannot tell)."""
        return None

    def refined(self, doubted: Mapping[str, torch.Tensor]) -> tuple[Reference, int]:
        """A reference with the doubted answers made more precise, and how many were."""
        return self, 0


# ------------------------------------------------------------------ the symbolic engine
@dataclass(frozen=True)
class Symbolic(Reference):
    engine: SymbolicEngine | None = None
    names: tuple[str, ...] = ()  # the inputs it answers for (not the --const ones)
    # the VJP for the table's upstream, computed when the engine was tried on it
    first: tuple[torch.Tensor, dict[str, torch.Tensor]] | None = None

    @property
    def ran(self) -> bool:
        return self.engine is not None

    def vjp(self, v: torch.Tensor, ones: bool = False) -> dict[str, Answer]:
        if self.engine is None:
            return {}
        v = v.to(torch.float64)
        known = self.first is not None and self.first[0].shape == v.shape \
            and torch.equal(self.first[0], v)
        grads = self.first[1] if known else self.engine.vjp(v)  # type: ignore[index]
        return {n: Answer(g) for n, g in grads.items()}

    def jacobian(self, out_shape: tuple[int, ...]) -> dict[str, Answer]:
        if self.engine is None:
            return {}
        n_out = int(torch.tensor(out_shape).prod()) if out_shape else 1
        basis = torch.eye(n_out, dtype=torch.float64, device=self.engine.device)
        rows = [self.engine.vjp(b.reshape(out_shape)) for b in basis]
        return {n: Answer(torch.stack([r[n].reshape(-1) for r in rows])) for n in self.names}

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> Answer | None:
        return Answer(self.engine.jvp(tangents)) if self.engine is not None else None

    def formulas(self, names: tuple[str, ...]) -> dict[str, str]:
        """The VJP formula per input, in terms of an upstream symbol no input uses."""
        if self.engine is None:
            return {}
        upstream = next((c for c in ("v", "v_", "upstream", "g_out") if c not in names), "v__")
        try:
            return self.engine.formulas(upstream)
        except Exception:  # a formula is a courtesy; the numbers stand without it
            return {}


def symbolic(setup: Setup) -> Symbolic:
    """The symbolic engine on the target's symbolic form (or why there is none)."""
    prepared = setup.prepared
    names = prepared.target.names
    form = prepared.target.symbolic()
    why = form if isinstance(form, str) else _symbolic_failure(form, setup)
    if isinstance(why, tuple):
        engine, first = why
        return Symbolic("symbolic", "symbolic", exact=True, engine=engine, names=names,
                        first=first)
    # (Python code never has a symbolic form: its reason stays in the report, but a note on
    # every such check would say what the reader knows)
    closing = (f"symbolic engine skipped: {why}",) if prepared.target.readable else ()
    return Symbolic("symbolic", "symbolic", exact=True, skipped=dict.fromkeys(names, why),
                    closing=closing)


def _symbolic_failure(form: SymbolicForm, setup: Setup
                      ) -> tuple[SymbolicEngine, tuple[torch.Tensor, dict]] | str:
    """The engine and its VJP for the table's upstream, or why there is none."""
    out_shape = tuple(setup.upstream.shape)
    try:
        engine = SymbolicEngine(form.expression, {**setup.prepared.bound.exact,
                                                  **form.constants},
                                constants=frozenset(form.constants))
        if engine.out_shape != out_shape:
            return f"the symbolic output has shape {engine.out_shape}, torch's {out_shape}"
        # the VJP now, so that a failure shows here as a skip, not later as a crash
        v = setup.upstream.to(torch.float64)
        return engine, (v, engine.vjp(v))
    except UsageError:
        raise
    except Exception as exc:  # the other two engines still give a verdict
        first = str(exc).splitlines()[0][:120] if str(exc) else ""
        return f"sympy could not handle this expression ({type(exc).__name__}: {first})"


# ------------------------------------------------------------------ finite differences
@dataclass(frozen=True)
class Finite(Reference):
    fd: FiniteDifferences | None = None
    estimates: Mapping[str, Estimate | None] = field(default_factory=dict)
    # a model checked at scale (budget.at_scale): projections over everything cover every
    # tensor (features/projections.py); `projected_only` got no element of its own
    scale: bool = False
    projected_only: tuple[str, ...] = ()
    # notes on inputs found elementwise by probing, and on sampled inputs (said after the rest)
    elementwise: Mapping[str, str] = field(default_factory=dict)
    sampled: tuple[str, ...] = ()

    @property
    def ran(self) -> bool:
        return any(e is not None for e in self.estimates.values())

    def said(self) -> tuple[str, ...]:
        """The engine's notes, then per input what its estimate says now (points the target
        rejected, columns that shared evaluations, found elementwise), then the sampled
        inputs': derived from the estimates, so a refined one is said as it is."""
        per_input = [n for name, est in self.estimates.items()
                     for n in (*rejected_note(est), *noisy_note(est, self.fd), *widened_note(est),
                               *grouped_note(est),
                               *((self.elementwise[name],) if name in self.elementwise
                                 else ()))]
        return (*self.notes, *per_input, *self.sampled)

    @property
    def answers_all(self) -> bool:
        return True

    def vjp(self, v: torch.Tensor, ones: bool = False) -> dict[str, Answer]:
        out = {}
        for name, est in self.estimates.items():
            if est is not None:
                values, error = est.vjp(v.to(torch.float64), ones=ones)
                out[name] = Answer(values, error, est.kink, est.checked)
        return out

    def jacobian(self, out_shape: tuple[int, ...]) -> dict[str, Answer]:
        out = {}
        for name, est in self.estimates.items():
            if est is not None:  # a column is at a kink (or sampled) for every output element
                jac, err = est.jacobian()
                checked = est.checked.reshape(1, -1) if est.checked is not None else None
                out[name] = Answer(jac, err, est.kink.reshape(1, -1), checked)
        return out

    def jvp(self, tangents: Mapping[str, torch.Tensor]) -> Answer | None:
        if self.fd is None:
            return None
        d = self.fd.directional(tangents)
        return Answer(d.value, d.error, d.kink)

    def mode(self, name: str) -> str | None:
        est = self.estimates.get(name)
        return est.mode if est is not None else None

    def kink(self, name: str) -> torch.Tensor | None:
        est = self.estimates.get(name)
        return est.kink if est is not None else None

    def refined(self, doubted: Mapping[str, torch.Tensor]) -> tuple[Finite, int]:
        if self.fd is None:
            return self, 0
        estimates, count = dict(self.estimates), 0
        for name, mask in doubted.items():
            est = estimates.get(name)
            if est is not None:
                estimates[name], n = self.fd.refine(est, mask)
                count += n
        return (replace(self, estimates=estimates), count) if count else (self, 0)


def finite(setup: Setup) -> Finite:
    """Estimates for every input: each element, or a seeded sample past the budget."""
    fd, notes = _engine(setup)
    options = setup.prepared.options
    estimates: dict[str, Estimate | None] = {}
    skipped: dict[str, str] = {}
    sampled: list[str] = []  # notes on sampled inputs come after the others
    covered = any(r.exact and r.ran for r in setup.before)
    every, target = setup.prepared.request.compare_all, setup.prepared.target
    scale = not every and at_scale(fd, target.parameters, options.max_fd, options.sample)
    alone: list[str] = []
    elementwise: dict[str, str] = {}
    for name in target.names:
        try:
            count = sample_size(fd, name, options.max_fd, options.sample, scale, every)
            if count == 0:
                estimates[name] = None
                alone.append(name)
                continue
            todo = fd.values[name].numel() if count is None else count
            progress = setup.progress(f"finite differences for {name}", todo) \
                if setup.progress and not fd.is_elementwise(name) else None
            if count is None:
                estimates[name] = fd.estimate(name, progress)
                if name in fd.probed and fd.is_elementwise(name):
                    elementwise[name] = (
                        f"finite differences: the target is elementwise in {name} (each output "
                        f"element moves with its own element of {name} only: {fd.probed[name]} "
                        "probing calls showed it), so all its elements were perturbed at once")
                continue
            estimates[name] = fd.sampled(name, count, seed_for(options.seed, f":sample:{name}"),
                                         progress)
        except (TargetError, UsageError, RuntimeError) as exc:
            # e.g. the user's forward fails at a perturbed point: the other engines still judge
            # (and an input left with nothing compared is `inconclusive`, never a pass)
            estimates[name] = None
            skipped[name] = target.perturbed_failure(exc)
            continue
        others = "the symbolic engine covers every element, " if covered \
            else "the others are `unchecked`, "
        if not scale:
            sampled.append(sampled_note(name, count, fd.values[name].numel(), options.sample,
                                        options.max_fd, fd.flops(), others, PROJECTIONS))
    closing = tuple(f"finite differences skipped for {n}: {why}" for n, why in skipped.items())
    return Finite("finite_difference", "finite diff", skipped=skipped, notes=tuple(notes),
                  closing=closing, fd=fd, estimates=estimates, scale=scale,
                  projected_only=tuple(alone), elementwise=elementwise, sampled=tuple(sampled))


def grouped_note(est: Estimate | None) -> list[str]:
    """The note on columns that shared evaluations (engines/fd/grouped.py)."""
    groups = getattr(est, "groups", None)
    if est is None or groups is None:
        return []
    alone, count = int((groups < 0).sum()), int(groups.max()) + 1
    if alone == groups.numel():
        return [f"finite differences: {est.name}'s columns were grouped by autograd's sparsity "
                "pattern, then every column was differenced on its own (the groups' differences "
                "did not fit the pattern: an entry it calls zero moved the output, or a kink lay "
                "in a group's stencil)"]
    apart = f"; {alone:,} were differenced on their own (their group's differences did not " \
        "fit the pattern)" if alone else ""
    return [f"finite differences: {est.name}'s Jacobian is sparse by autograd's pattern, so its "
            f"{groups.numel():,} columns shared {count:,} group{'s' if count > 1 else ''} of "
            f"evaluations, each verified against the pattern{apart}"]


MAX_LISTED = 6  # rejected elements named in the note


def _listed(mask: torch.Tensor) -> tuple[int, str]:
    """How many elements `mask` marks, and their first MAX_LISTED flat indices in words."""
    flat = torch.nonzero(mask.reshape(-1)).reshape(-1)
    shown = ", ".join(str(i) for i in flat[:MAX_LISTED].tolist())
    more = f" and {len(flat) - MAX_LISTED:,} more" if len(flat) > MAX_LISTED else ""
    return len(flat), shown + more


def rejected_note(est: Estimate | None) -> list[str]:
    """The note on elements whose perturbed points the target rejected at every step."""
    if est is None or est.rejected is None or not bool(est.rejected.any()):
        return []
    count, listed = _listed(est.rejected)
    return [f"finite differences: the target rejected the perturbed points of {count:,} "
            f"element(s) of {est.name} (flat index {listed}) at every step tried, down "
            f"to {1 / REFINE_FACTOR ** REFINE_ROUNDS:g} of the first ({est.why}); they are "
            "`unchecked`, the other elements were compared"]


def widened_note(est: Estimate | None) -> list[str]:
    """The note on elements estimated at a step larger than the run's (round-off swamped
    theirs)."""
    if est is None or not est.widened:
        return []
    return [f"finite differences: round-off swamped the estimates of {est.widened:,} element(s) "
            f"of {est.name} at the run's step (the target rounds more coarsely than the step "
            f"suits), so they were estimated at larger steps ({WIDEN_FACTOR:g}× at a time, at most "
            f"{MAX_EPS:g} of the element), which converged or bounded their error closer"]


def noisy_note(est: Estimate | None, fd: FiniteDifferences | None) -> list[str]:
    """The note on elements whose estimate stayed swamped by round-off at every step tried."""
    if est is None or fd is None or est.noisy is None or not bool(est.noisy.any()):
        return []
    reached = min(MAX_EPS, fd.point.eps * WIDEN_FACTOR ** WIDEN_ROUNDS)
    further = "" if reached >= MAX_EPS else "; a larger --eps reaches further"
    count, listed = _listed(est.noisy)
    return [f"finite differences: the estimates of {count:,} element(s) of {est.name} "
            f"(flat index {listed}) stayed dominated by round-off at every step tried, "
            f"up to {reached:g} of the element: they are `unchecked` (the target's output "
            f"rounds too coarsely there to difference{further})"]


def _engine(setup: Setup) -> tuple[FiniteDifferences, list[str]]:
    """Finite differences in float64; in the run's dtype when the target cannot take float64,
    or where a float64 copy of the model is what does not fit (`lean`: fit.py). A target
    computing in a lower precision gets a step that suits it (policy.eps_for)."""
    bound, options = setup.prepared.bound, setup.prepared.options
    lower = setup.computed != torch.float64 and setup.computed != bound.dtype
    extra = {"round_off": setup.computed if lower else None, "claimed": setup.claimed,
             "diagonal": setup.diagonal}
    low_eps = options.eps or low_precision_eps(bound.dtype)
    eps = low_eps if bound.lean else eps_for(options.eps, setup.computed, bound.dtype)
    try:
        return _fd(setup, bound.exact, eps, bound.dtype if bound.lean else torch.float64,
                   **extra), []
    except GradscopeError as exc:
        if bound.dtype == torch.float64 or bound.lean:
            raise
        first = str(exc).splitlines()[-1]
        fd = _fd(setup, {n: t.to(bound.dtype) for n, t in bound.exact.items()}, low_eps,
                 bound.dtype)
        return fd, [f"finite differences ran in {options.dtype} (eps {low_eps:.3g}): the target "
                    f"failed in float64 ({first})"]


def _fd(setup: Setup, values: dict[str, torch.Tensor], eps: float, dtype: torch.dtype,
        **extra: Any) -> FiniteDifferences:
    target = setup.prepared.target
    return FiniteDifferences(setup.for_values, values, elementwise=target.elementwise_inputs,
                             eps=eps, dtype=dtype, around=target.traced_around, probe=not
                             target.readable, batched=target.batchable, **extra)


# The reference engines, in the order they start (and their columns appear).
REFERENCES: tuple[Callable[[Setup], Reference], ...] = (symbolic, finite)
