"""The op table (`gradscope ops`) as a rich table or JSON."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from rich import box
from rich.table import Table

SCHEMA = "gradscope.ops/1"


def show(rows: list[Any], console: Any) -> None:
    table = Table(title="gradscope expression functions and operators", title_justify="left",
                  box=box.SIMPLE_HEAD)
    for column in ("family", "name", "spellings", "arguments", "symbolic", "kinks", "domain",
                   "gradient", "summary"):
        wraps = column in ("spellings", "arguments", "summary", "family", "symbolic")
        table.add_column(column, overflow="fold", no_wrap=not wraps,
                         ratio=2 if column in ("spellings", "summary") else None)
    for r in sorted(rows, key=lambda r: r.family):
        domain = f"[{r.domain[0]:g}, {r.domain[1]:g}]" if r.domain else "—"
        table.add_row(r.family, r.name, ", ".join(r.spellings), r.signature, r.symbolic,
                      r.kinks or "—", domain, r.gradient or "—", r.summary)
    console.print(table)


def to_json(rows: list[Any]) -> str:
    return json.dumps({"schema": SCHEMA, "ops": [asdict(r) for r in rows]}, indent=2)
