"""Reading a report back: the plain data `Report.to_dict` wrote (or its JSON, `--format json`)
made into the Report again — the engine columns `_columns_dict` laid out under the contract's
keys taken back out, statuses as `Status`, the strings JSON writes for NaN and infinities as
floats where a field holds numbers. Every renderer then draws it as it drew the original."""

from __future__ import annotations

import dataclasses
from typing import Any

from gradscope.report.model import (
    Column,
    Diagnostic,
    Failure,
    ForwardReport,
    InputReport,
    NamedCheck,
    TensorSummary,
)
from gradscope.report.status import Status

NESTED = {"output": TensorSummary, "upstream": TensorSummary, "forward": ForwardReport,
          "inputs": InputReport, "diagnostics": Diagnostic, "upstream_checks": NamedCheck,
          "failures": Failure}


def report(cls: type, data: dict[str, Any]) -> Any:
    """The Report `cls` of `data`."""
    data = dict(data)
    for name, kind in NESTED.items():
        value = data.get(name)
        if isinstance(value, list):
            data[name] = [_built(kind, v) for v in value]
        elif isinstance(value, dict):
            data[name] = _built(kind, value)
    data["modules"] = [{**m, "status": Status(m["status"])} if "status" in m else m
                       for m in data.get("modules", [])]
    own = {f.name for f in dataclasses.fields(cls)}  # (the others: the features' fields)
    return cls(**_fields(cls, data), fields={k: v for k, v in data.items() if k not in own})


def with_columns(cls: type, data: dict[str, Any]) -> Any:
    """An InputReport or ForwardReport of `data`, its engine columns taken back out."""
    data = dict(data)
    columns = _columns_of(data)
    return cls(**_fields(cls, data), columns=columns)


def _columns_of(data: dict[str, Any]) -> dict[str, Column]:
    """The engine columns `_columns_dict` laid out, taken back out of `data` (its keys
    removed); a report written before `column_labels` was a key: each engine column by its
    name."""
    labels = data.pop("column_labels", None)
    if labels is None:
        known = {f.name for f in dataclasses.fields(InputReport)} | {"tangent"}
        labels = {k: k.replace("_", " ") for k in list(data)
                  if k not in known and not k.endswith(_PARTS) and f"{k}_skipped" in data}
    return {name: Column(data.pop(name, None), _decoded(data.pop(f"{name}_error", None)),
                         data.pop(f"{name}_skipped", None), data.pop(f"{name}_mode", None),
                         label, bool(data.pop(f"{name}_failed", False)))
            for name, label in labels.items()}


_PARTS = ("_skipped", "_mode", "_error", "_failed")


def check(data: dict[str, Any]) -> NamedCheck:
    """A NamedCheck of its JSON: one that passed with a failing result was a note."""
    fields = _fields(NamedCheck, data)
    fields.setdefault("result", Status.OK)
    passed = bool(data.get("passed", True))
    fields["noted"] = passed and fields["result"] in (Status.MISMATCH, Status.FAILED)
    return NamedCheck(**fields)


def _built(kind: type, data: dict[str, Any]) -> Any:
    own = check if kind is NamedCheck else getattr(kind, "from_dict", None)
    return own(data) if own is not None else kind(**_fields(kind, data))


def _fields(kind: type, data: dict[str, Any]) -> dict[str, Any]:
    """`data`'s values for `kind`'s fields (others left out): statuses as `Status`, the
    strings JSON writes for NaN and infinities as floats where a field holds numbers."""
    out = {}
    for f in dataclasses.fields(kind):
        if f.name not in data or f.name == "columns":
            continue
        value = data[f.name]
        kind_text = str(f.type)
        if "Status" in kind_text:
            value = _statuses(value)
        elif "float" in kind_text or kind_text == "Any":
            value = _decoded(value)
        out[f.name] = value
    return out


def _statuses(value: Any) -> Any:
    if isinstance(value, str):
        return Status(value)
    if isinstance(value, dict):
        return {k: _statuses(v) for k, v in value.items()}
    return value


NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _decoded(value: Any) -> Any:
    """The JSON's "nan", "inf", "-inf" back to floats, at any depth."""
    if isinstance(value, str):
        return NON_FINITE.get(value, value)
    if isinstance(value, list):
        return [_decoded(v) for v in value]
    if isinstance(value, dict):
        return {k: _decoded(v) for k, v in value.items()}
    return value
