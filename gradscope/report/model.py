"""The Report: the one data model every command returns and every renderer reads.

Plain dataclasses of plain Python values (nested lists, floats, strings), so `--format json` is
`dataclasses.asdict` plus number encoding, and nothing else describes a result twice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "gradscope.report/1"


@dataclass
class TensorSummary:
    """A tensor shown in the header (output, upstream)."""

    shape: list[int]
    values: Any
    elements_reported: str = "all"  # or "head": values holds the first elements, flattened


@dataclass
class InputReport:
    name: str
    role: str
    shape: list[int]
    values: Any
    autograd: Any
    symbolic: Any
    finite_difference: Any
    formula: str | None
    max_abs_error: float
    status: str
    elements_reported: str = "all"
    indices: list[list[int]] | None = None
    element_status: Any = None
    error: Any = None
    status_counts: dict[str, int] = field(default_factory=dict)
    origin: str = "given"
    symbolic_skipped: str | None = None
    finite_difference_skipped: str | None = None
    finite_difference_mode: str | None = None
    jacobian_shape: list[int] | None = None
    autograd_skipped: str | None = None
    # per tensor, for the model summary: elements an engine compared / all, max |autograd −
    # finite differences| / max |finite differences|, ‖autograd‖, the fraction of exact zeros
    checked: int = 0
    total: int = 0
    max_rel_error: float | None = None
    grad_norm: float | None = None
    zero_fraction: float | None = None


@dataclass
class Diagnostic:
    kind: str
    op: str
    where: str
    inputs: list[str]
    count: int
    message: str
    hint: str
    indices: dict[str, list[list[int]]] | None = None
    # mismatch_pattern: the relation autograd follows (factor, zero, transposed, permuted,
    # swapped, additive, subset), its factor where it has one, and a one-line summary
    relation: str | None = None
    factor: float | None = None
    summary: str | None = None
    module: str | None = None  # models: the module path where it happens ("" the top level)


@dataclass
class UpstreamCheck:
    """One extra verdict of `check`: a random upstream vector, or the full Jacobian."""

    label: str
    passed: bool
    max_abs_error: float
    mismatches: int
    statuses: dict[str, str]
    # ok, mismatch, surrogate, ... (the worst over its inputs), or "not run": no engine
    # compared anything for it (its max_abs_error then means nothing)
    result: str = ""


@dataclass
class ForwardReport:
    tangent: dict[str, Any]
    autograd: Any
    symbolic: Any
    finite_difference: Any
    status: str
    max_abs_error: float
    element_status: Any = None
    elements_reported: str = "all"
    indices: list[list[int]] | None = None
    symbolic_skipped: str | None = None
    finite_difference_skipped: str | None = None
    autograd_skipped: str | None = None


@dataclass
class Report:
    command: str
    target: str
    target_kind: str
    dtype: str
    passed: bool
    output: TensorSummary
    upstream: TensorSummary
    inputs: list[InputReport]
    diagnostics: list[Diagnostic]
    schema: str = SCHEMA
    version: str = ""
    device: str = "cpu"
    seed: int = 0
    fail_on: str = "mismatch"
    tolerances: dict[str, float] = field(default_factory=dict)
    upstream_checks: list[UpstreamCheck] = field(default_factory=list)
    forward: ForwardReport | None = None
    accumulation: dict[str, Any] | None = None
    intermediates: list[dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    user_output: str | None = None  # what the target printed to stdout (captured)
    upstream_source: str = "ones"  # the table's upstream: "ones" (the default) or "--grad"
    declared: dict[str, str] = field(default_factory=dict)  # input → why declared surrogate
    # NaN or inf in the output or in autograd's gradient at the given inputs (not in a
    # perturbed point): a failure unless `allow_nan`
    nonfinite: list[str] = field(default_factory=list)  # "output" and/or input names
    allow_nan: bool = False
    full: bool = False  # --full: tables show every reported element
    # the status of every module path among the tensors' names (`blocks.2.attn`), worst first
    modules: list[dict[str, Any]] = field(default_factory=list)
    # models: module paths in the order the forward first ran them (where wrong gradients
    # start follows it; empty: parameter order)
    forward_order: list[str] = field(default_factory=list)
    # --const inputs: data, never differentiated: name → {"shape", "dtype", "origin"}
    constants: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def skipped(self) -> list[str]:
        """The inputs a reference engine that should have judged them did not (finite
        differences failed or were refused): their verdict rests on less than it says."""
        return [i.name for i in self.inputs if i.finite_difference_skipped]

    @property
    def mismatches(self) -> int:
        return sum(i.status_counts.get("mismatch", 0) for i in self.inputs)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        for optional in ("forward", "accumulation", "intermediates", "user_output"):
            if data[optional] is None:
                del data[optional]
        # schema and version first, so a reader sees what it is reading before anything else
        head = {"schema": data.pop("schema"), "version": data.pop("version")}
        return head | data

    # The contract's conveniences (`report.to_json()`, ...): the one place `report` reaches
    # into `render`, lazily (tests/test_layout.py allows exactly these imports).
    def to_json(self, indent: int | None = 2) -> str:
        from gradscope.render.json import dumps

        return dumps(self, indent=indent)

    def to_markdown(self) -> str:
        from gradscope.render.markdown import render

        return render(self)

    def to_text(self, width: int = 120) -> str:
        """The table rendering as plain text (no colour), e.g. for assertion messages."""
        from gradscope.render import text

        return text(self, "table", width)
