"""The one protocol every analysis follows, and the guard that holds it to the rules.

A feature is one analysis (surrogates, departures, projections, custom Functions checked in
place, …) in one module of this package. The stages visit `FEATURES` in order and call its
hooks, each a no-op here:

* `facts(ctx)` — the excuse stage: what the feature gathers (its own frozen value, kept in
  `Excuses` under its name; None: nothing). Raising `StepAside` says it does not fit.
* `explain(ctx, name, view, cmp)` — the judge stage, each input in each view: mismatches the
  evidence shows are no bug (torch's documented departure, a step's surrogate) re-marked.
  Relations are read after these, from what is still a mismatch.
* `declared(ctx, name, view, cmp)` — then the user's declarations (a declared surrogate).
* `relabel(ctx, name, view, cmp)` — last, statuses that only name what an agreement is
  (`vanishing` zeros).
* `statuses(ctx, statuses)` — inputs' statuses the feature's own evidence decides (a model at
  scale: tensors only the projections covered) and why any is inconclusive.
* `checks(ctx, decided)` — named checks (`NamedCheck`s). Only evidence about the target may
  fail one; a feature that compares something else (an inner Function's own backward) says
  its check `noted` (never failing) unless the target's own evidence already fails
  (`decided.failing`).
* `target_checks(ctx)` — diagnostics of named checks on the target itself (linearity in
  grad_output, determinism, in-place writes); those of a failing kind fail the run.
* `diagnose(ctx, verdict, said)` — diagnostics and notes (`Diagnosis`), reading earlier features'
  `said` by name.
* `reported(ctx, inputs)` — the report fields the feature fills: its own (`fields`: `declared`,
  `coverage`), or the inputs' rows (a run mode's column).

A feature also owns its options (`options`: `Option`s, read with `Option.value`): the registry
merges them into the command line, the Python API and the run config.

The rules (docs/architecture.md): evidence decides; an excuse carries its proof; a feature that
does not fit steps aside. `guarded` enforces the third: a hook that raises anything but a
usage error (the user's own option is wrong: exit 2) or a stop is skipped with a note naming
the feature and why, and the feature takes no further part in the run — the verdict is what the
evidence says without it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import torch

from gradscope.compare.elements import Comparison
from gradscope.errors import Stopped, UsageError
from gradscope.evidence.gather import Evidence, View
from gradscope.evidence.prepare import Prepared
from gradscope.options import Option
from gradscope.report.model import Diagnostic, NamedCheck
from gradscope.report.status import Status

if TYPE_CHECKING:
    from gradscope.report.model import InputReport


F = TypeVar("F")


class StepAside(Exception):
    """Raised by a hook: the feature does not fit this target (why), and steps aside."""


@dataclass(frozen=True)
class Context:
    """What every hook reads: the prepared run, the evidence, and the facts of the features
    that ran before (by name; a feature that stepped aside has none)."""

    prepared: Prepared
    evidence: Evidence
    facts: Mapping[str, Any] = field(default_factory=dict)

    def of(self, feature: Feature[F]) -> F | None:
        """The facts `feature` gathered (None: none, or it stepped aside). A feature reads its
        own, and those of the features it declares (`needs`, `reads`: tests/features/
        test_registry.py holds every lookup to that)."""
        return self.facts.get(feature.name)


@dataclass(frozen=True)
class Interim:
    """What the judge stage has decided before the features' checks: each input's status,
    the named checks so far, the elements judged the user's surrogate, and whether anything
    else of the target's own evidence fails the run (a backward's named check, NaN or inf at
    the given inputs); `failing` — whether the target's own evidence fails it."""

    statuses: Mapping[str, Status]
    checks: Sequence[NamedCheck]
    surrogate: Mapping[str, torch.Tensor]
    otherwise: bool = False

    @property
    def failing(self) -> bool:
        return self.otherwise or any(s.fails for s in self.statuses.values()) or any(
            not c.passed for c in self.checks)


@dataclass(frozen=True)
class Diagnosis:
    """What a feature's diagnosis adds: diagnostics, notes, and any value later features
    read (the relations found)."""

    diagnostics: tuple[Diagnostic, ...] = ()
    notes: tuple[str, ...] = ()
    value: Any = None


class Feature(Generic[F]):
    """One analysis, whose facts are an F. Subclasses set `name` and override the hooks they
    need, and declare the features they read: `needs` — read in the same stage (their facts in
    `facts`, their said value in `diagnose`), so they run first (`ordered`); `reads` — read in a
    later stage only, in any order. Both by module (a feature module's `FEATURE`); where the
    module imports this one (two features reading each other across stages), by `later`, and
    the lookup imports it where it runs (no import cycle at the top)."""

    name: ClassVar[str] = ""
    needs: ClassVar[tuple[ModuleType | Later, ...]] = ()
    reads: ClassVar[tuple[ModuleType | Later, ...]] = ()
    # the options it owns (merged into the command line, the API and the run config by the
    # registry; read with `Option.value(options)`), and the report fields it fills: name → the
    # value where it says nothing (None: left out of the JSON)
    options: ClassVar[tuple[Option, ...]] = ()
    fields: ClassVar[Mapping[str, Any]] = {}
    # whether the elements this feature's excuses re-mark `surrogate` (recorded by its name
    # on the comparison) are the user's surrogate (a step's surrogate is; torch's own
    # documented departure is not)
    users: ClassVar[bool] = True

    def facts(self, ctx: Context) -> F | None:
        return None

    def explain(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        return cmp

    def declared(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        return cmp

    def relabel(self, ctx: Context, name: str, view: View, cmp: Comparison) -> Comparison:
        return cmp

    def statuses(self, ctx: Context, statuses: Mapping[str, Status]
                 ) -> tuple[dict[str, Status], dict[str, str]]:
        return dict(statuses), {}

    def checks(self, ctx: Context, decided: Interim) -> list[NamedCheck]:
        return []

    def target_checks(self, ctx: Context) -> tuple[Diagnostic, ...]:
        return ()

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        return Diagnosis()

    def reported(self, ctx: Context, inputs: Sequence[InputReport]) -> dict[str, Any]:
        return {}


class Findings(Feature[F]):
    """A feature whose facts carry `findings` — diagnostics of named checks on the target (a
    failing kind fails the run) — and, where it has them, `notes`: both said as they are."""

    def target_checks(self, ctx: Context) -> tuple[Diagnostic, ...]:
        facts: Any = ctx.of(self)
        return facts.findings if facts is not None else ()

    def diagnose(self, ctx: Context, verdict: Any, said: Mapping[str, Diagnosis]) -> Diagnosis:
        facts: Any = ctx.of(self)
        if facts is None:
            return Diagnosis()
        return Diagnosis(tuple(facts.findings), tuple(getattr(facts, "notes", ())))


T = TypeVar("T")


class Guard:
    """Runs features' hooks under the third rule, collecting a note for each feature that
    stepped aside; `active` are the features still taking part."""

    def __init__(self, features: Sequence[Feature], aside: Mapping[str, str] | None = None):
        self.features = tuple(features)
        self.aside: dict[str, str] = dict(aside or {})

    @property
    def active(self) -> Iterator[Feature]:
        return (f for f in self.features if f.name not in self.aside)

    def call(self, feature: Feature, hook: Callable[..., T], fallback: T, *args: Any) -> T:
        """`hook(*args)`, or `fallback` with the feature set aside where it raised."""
        try:
            return hook(*args)
        except (UsageError, Stopped, KeyboardInterrupt):
            raise
        except StepAside as why:
            self.aside[feature.name] = str(why)
        except Exception as exc:  # (user code under a feature's own calls, or the feature)
            first = (str(exc).splitlines() or [""])[0][:200]
            self.aside[feature.name] = f"it raised {type(exc).__name__}: {first}"
        return fallback

    def notes(self) -> tuple[str, ...]:
        return tuple(f"{name} stepped aside ({why}); the verdict rests on the evidence "
                     "without it" for name, why in self.aside.items())


def value_of(said: Mapping[str, Diagnosis], feature: Feature[Any]) -> Any:
    """The value `feature` said (None: it said none, or did not run)."""
    found = said.get(feature.name)
    return found.value if found is not None else None


@dataclass(frozen=True)
class Later:
    """A feature module declared by its name in this package, imported when first asked: the
    declaration of a feature that imports the declaring one (the registry checks it is one)."""

    name: str

    @property
    def module(self) -> ModuleType:
        return importlib.import_module(f"gradscope.features.{self.name}")


def later(name: str) -> Later:
    """The feature module `name` of this package, for `needs`/`reads` (see `Later`)."""
    return Later(name)


def module_of(declared: ModuleType | Later) -> ModuleType:
    return declared.module if isinstance(declared, Later) else declared


def ordered(features: Sequence[Feature[Any]]) -> tuple[Feature[Any], ...]:
    """`features` in their listed order, moved only where one needs another listed after it
    (a stable topological order by `needs`); ValueError where a feature needs or reads one
    that is not listed, or the needs make a cycle."""
    listed = {f.name: f for f in features}
    out: list[Feature[Any]] = []
    placing: set[str] = set()

    def place(feature: Feature[Any]) -> None:
        if feature in out:
            return
        if feature.name in placing:
            raise ValueError(f"features that need each other: {feature.name!r}")
        placing.add(feature.name)
        for declared in feature.reads:
            _registered(feature, declared, "reads")
        for declared in feature.needs:
            place(_registered(feature, declared, "needs"))
        placing.discard(feature.name)
        out.append(feature)

    def _registered(feature: Feature[Any], declared: ModuleType | Later, how: str
                    ) -> Feature[Any]:
        try:
            found = getattr(module_of(declared), "FEATURE", None)
        except ImportError:
            found = None
        if found is None or listed.get(found.name) is not found:
            what = declared.name if isinstance(declared, Later) else declared.__name__
            raise ValueError(f"feature {feature.name!r} {how} {what}, which is not "
                             "registered")
        return found

    for feature in features:
        place(feature)
    return tuple(out)


def wrong_inputs(evidence: Evidence) -> set[str]:
    """The inputs any raw comparison found a mismatch in."""
    return {n for view in evidence.views for n, c in view.raw.items() if c.has(Status.MISMATCH)}
