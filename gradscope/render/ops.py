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
                  box=box.SIMPLE_HEAD, expand=True)
    for column in ("family", "name", "spellings", "arguments", "symbolic", "kinks, domain",
                   "summary"):
        narrow = column in ("family", "symbolic", "kinks, domain")
        table.add_column(column, overflow="fold", no_wrap=column == "name",
                         width=12 if narrow else None,
                         ratio=None if narrow else 3 if column in ("spellings", "summary")
                         else 2 if column == "arguments" else 1)
    for r in sorted(rows, key=lambda r: r.family):
        marks = [r.kinks.split(" ")[0] if r.kinks else "",
                 f"[{r.domain[0]:g}, {r.domain[1]:g}]" if r.domain else "",
                 r.gradient or ""]
        table.add_row(r.family, r.name, ", ".join(r.spellings), r.signature, r.symbolic,
                      "; ".join(m for m in marks if m) or "—", r.summary)
    console.print(table)


def to_json(rows: list[Any]) -> str:
    return json.dumps({"schema": SCHEMA, "ops": [asdict(r) for r in rows]}, indent=2)
