"""The Report: the one data model every command returns and every renderer reads.

Frozen dataclasses of plain Python values (nested lists, floats, strings), built once at the
end of a run and never changed after: a stage that wants a different report makes a new one
(`dataclasses.replace`). `--format json` is `dataclasses.asdict`, with each input's engine
columns laid out under the contract's keys (`autograd`, `symbolic`, `finite_difference`, and
`<engine>_skipped`), plus number encoding.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from gradscope.report import kinds
from gradscope.report.status import Status

SCHEMA = kinds.CHECK


@dataclass(frozen=True)
class TensorSummary:
    """A tensor shown in the header (output, upstream)."""

    shape: list[int]
    values: Any
    elements_reported: str = "all"  # or "head": values holds the first elements, flattened


@dataclass(frozen=True)
class Column:
    """One engine's answer for one tensor, as reported: its values (the reported elements),
    its own error bound where it has one (finite differences), why it is missing (`skipped`,
    values None) and how it was computed (`mode`: elementwise, dense, sampled)."""

    values: Any = None
    error: Any = None
    skipped: str | None = None
    mode: str | None = None
    label: str = ""  # its heading in a table ("finite diff")
    # `skipped` is a failure of an engine that should have answered (finite differences that
    # failed at a perturbed point, a backward that failed), not an engine that does not apply
    failed: bool = False


def _columns_dict(columns: dict[str, Column], modes: bool) -> dict[str, Any]:
    """The contract's keys for some engine columns: `name` (values) first, then
    `name_skipped` (and `name_mode`; `name_error` where an engine has an error bound,
    `name_failed` where it failed), and `column_labels`: each column's heading."""
    out: dict[str, Any] = {name: c.values for name, c in columns.items()}
    for name, c in columns.items():
        out[f"{name}_skipped"] = c.skipped
        if modes:
            out[f"{name}_mode"] = c.mode
        if c.error is not None:
            out[f"{name}_error"] = c.error
        if c.failed:
            out[f"{name}_failed"] = True
    out["column_labels"] = {name: c.label for name, c in columns.items()}
    return out



class ByName(list):
    """A list of named items (inputs, diagnostics) that also answers to a name:
    `report.inputs["x"]`."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            found = next((item for item in self if getattr(item, "name", None) == key), None)
            if found is None:
                names = ", ".join(str(getattr(i, "name", "?")) for i in self)
                raise KeyError(f"{key!r}; the names are: {names}")
            return found
        return super().__getitem__(key)


class _Columns:
    """`item.autograd`, `item.symbolic_skipped`, …: an engine's column read by its name."""

    columns: dict[str, Column]

    def tensor(self, engine: str = "autograd") -> Any:
        """An engine's column as a torch tensor: shaped like the tensor when every element is
        reported, else the reported (worst) elements in a row (`indices` says where)."""
        import torch

        values = self.__dict__["columns"][engine].values
        if values is None:
            raise ValueError(f"{engine} has no values here: "
                             f"{self.__dict__['columns'][engine].skipped}")
        flat = torch.tensor(values, dtype=torch.float64).reshape(-1)
        shape = getattr(self, "jacobian_shape", None) or getattr(self, "shape", None)
        if getattr(self, "elements_reported", "all") == "all" and shape is not None:
            return flat.reshape(shape)
        return flat

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        columns = self.__dict__.get("columns") or {}
        if name in columns:
            return columns[name].values
        engine, _, part = name.rpartition("_")
        if engine in columns and part in ("skipped", "mode", "error"):
            return getattr(columns[engine], part)
        if part == "skipped" or (part == "mode" and engine):
            return None
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")


@dataclass(frozen=True)
class InputReport(_Columns):
    name: str
    role: str
    shape: list[int]
    values: Any
    columns: dict[str, Column]  # engine name → its column (autograd first)
    formula: str | None
    max_abs_error: float
    status: Status
    elements_reported: str = "all"
    indices: list[list[int]] | None = None
    element_status: Any = None
    error: Any = None  # |autograd − reference| per reported element
    status_counts: dict[str, int] = field(default_factory=dict)
    origin: str = "given"  # how the values were made: the torch call that makes them again
    described: str = ""  # ...in a header's words ("spread(25) over ±6.37, shuffled (seed 7)")
    jacobian_shape: list[int] | None = None
    # per tensor, for the model summary: elements an engine compared / all, max |autograd −
    # finite differences| / max |finite differences|, ‖autograd‖, the fraction of exact zeros
    checked: int = 0
    total: int = 0
    max_rel_error: float | None = None
    grad_norm: float | None = None
    zero_fraction: float | None = None
    grad_mean_abs: float | None = None  # mean and max |autograd| over its finite elements
    grad_max_abs: float | None = None
    # positions into the reported arrays of the rows a table shows, worst first (chosen once,
    # when the report is built, for every renderer)
    rows: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in ("columns", "rows")}
        head = {k: data.pop(k) for k in ("name", "role", "shape", "values")}
        return head | _columns_dict(self.columns, modes=True) | data | {"rows": self.rows}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputReport:
        from gradscope.report.read import with_columns

        return with_columns(cls, data)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class NamedCheck:
    """One extra verdict of `check`: a random upstream vector, the full Jacobian, or a
    feature's own (a projection, a custom Function checked in place, an opcheck test).

    `result`: ok, mismatch, surrogate, … (the worst over its inputs), "failed" (a test that
    compares no numbers), or "not run": nothing compared (its max_abs_error then means
    nothing). It passes unless its result is a mismatch or a failure — or it is `noted`: a
    comparison of something other than the target (an inner Function's own backward) that the
    target's own evidence does not bear out is said, and never fails the run (rule 1)."""

    label: str
    result: Status = Status.OK
    max_abs_error: float = float("nan")
    mismatches: int = 0
    statuses: dict[str, Status] = field(default_factory=dict)
    noted: bool = False

    @property
    def passed(self) -> bool:
        return self.noted or self.result not in (Status.MISMATCH, Status.FAILED)

    def to_dict(self) -> dict[str, Any]:  # (the JSON's keys and order as they always were)
        return {"label": self.label, "passed": self.passed,
                "max_abs_error": self.max_abs_error, "mismatches": self.mismatches,
                "statuses": _plain(self.statuses), "result": self.result}


@dataclass(frozen=True)
class ForwardReport(_Columns):
    tangent: dict[str, Any]
    columns: dict[str, Column]
    status: Status
    max_abs_error: float
    element_status: Any = None
    elements_reported: str = "all"
    indices: list[list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name != "columns"}
        return {"tangent": data.pop("tangent")} | _columns_dict(self.columns, modes=False) | data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ForwardReport:
        from gradscope.report.read import with_columns

        return with_columns(cls, data)


@dataclass(frozen=True)
class Failure:
    """One reason a run fails. `kind`: `mismatch` or `inconclusive` (an input), a failing
    diagnostic's kind (`nonlinear_backward`, …), `check` (a named check), `nonfinite` (NaN or
    inf at the given inputs), `forward` (forward mode), `warning` (--fail-on warning).
    `subject`: what failed (an input, a check's label, ...); `count`: elements where counted;
    `detail`: what the headline adds (why nothing was compared, the inputs of a check, ...)."""

    kind: str
    subject: str
    count: int = 0
    detail: str = ""


@dataclass(frozen=True)
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
    upstream_checks: list[NamedCheck] = field(default_factory=list)
    forward: ForwardReport | None = None
    accumulation: dict[str, Any] | None = None
    intermediates: list[dict[str, Any]] | None = None
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    user_output: str | None = None  # what the target printed to stdout (captured)
    upstream_source: str = "ones"  # the table's upstream: "ones" (the default) or "--grad"
    # the default upstream is 0 at this many output elements, where the output is NaN or
    # infinite (the gradient is compared where the function is defined)
    upstream_undefined: int = 0
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
    # why the run fails (empty: it passed); `passed` is `not failures`, and the headline is
    # written from them
    failures: list[Failure] = field(default_factory=list)
    # a model (a target with parameters, or more tensors than a handful): summary first
    model: bool = False
    # where the forward branched on the inputs' values, and how many elements took each side:
    # [{"where", "op", "sides": {label: elements}, "one_sided"}]
    branches: list[dict[str, Any]] = field(default_factory=list)
    # the fields features own (each declares its own: `declared`, `coverage`, `compile`, …):
    # in the JSON at the top level (None: left out), read as attributes (`report.coverage`)
    fields: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", ByName(self.inputs))

    def __getattr__(self, name: str) -> Any:  # (only where no attribute of its own is)
        owned = self.__dict__.get("fields")
        if owned is not None and name in owned:
            return owned[name]
        raise AttributeError(f"the report has no field {name!r}")

    def __getitem__(self, name: str) -> InputReport:
        """`report["x"]`: the input (or parameter) named so."""
        return self.inputs[name]

    @property
    def skipped(self) -> list[str]:
        """The inputs a reference engine that should have judged them did not (finite
        differences failed or were refused): their verdict rests on less than it says."""
        return [i.name for i in self.inputs
                if any(c.failed for n, c in i.columns.items() if n != "autograd")]

    @property
    def mismatches(self) -> int:
        return sum(i.status_counts.get(Status.MISMATCH, 0) for i in self.inputs)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name != "fields"}
        for optional in ("forward", "accumulation", "intermediates", "user_output"):
            if data[optional] is None:
                del data[optional]
        data |= {k: _plain(v) for k, v in self.fields.items() if v is not None}
        # schema and version first, so a reader sees what it is reading before anything else
        head = {"schema": data.pop("schema"), "version": data.pop("version")}
        return head | data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """The report `to_dict` wrote (or its JSON, read back: `from_json`), whole: what
        every renderer reads, without running a check again (report/read.py)."""
        from gradscope.report.read import report

        return report(cls, data)

    @classmethod
    def from_json(cls, text: str) -> Report:
        """The report `to_json` (`--format json`) wrote."""
        import json

        return cls.from_dict(json.loads(text))

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

    def __rich_console__(self, console: Any, options: Any) -> Any:
        """`rich.print(report)`, or a report as the last value of a cell where rich's
        notebook display is on: the same tables as the command line."""
        from gradscope.render import segments

        yield from segments(self, options)

    def plot(self) -> Any:
        """The gradient-flow picture (`--plot`'s): mean and max |gradient| per tensor on a
        log scale, failing tensors in red. A notebook shows it; `.save("flow.svg")` (or
        `.png`, with matplotlib) writes it."""
        from gradscope.render import flow_picture

        return flow_picture(self)

    def _repr_html_(self) -> str:
        """A notebook cell's display: the tables, coloured, instead of a dataclass dump."""
        from gradscope.render import html

        return html(self)

    def __repr__(self) -> str:
        passed = "passed" if self.passed else "FAILED"
        names = ", ".join(i.name for i in self.inputs[:6]) + (" …" if len(self.inputs) > 6
                                                                else "")
        return f"<gradscope Report {self.command} {self.target!r}: {passed}; inputs {names}>"


def _plain(value: Any) -> Any:
    """A field as plain data: dataclasses through their own to_dict where they have one."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)
        return own() if own is not None else {f.name: _plain(getattr(value, f.name))
                                               for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
