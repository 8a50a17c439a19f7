"""The kinds of report gradscope writes, each named by its JSON `schema`: a check's
(check/jvp/jacobian), a backward graph's, a sweep's and a suite run's. Renderers and output
formats say which kinds they write by these names (render.FORMATS)."""

from __future__ import annotations

from typing import Any

CHECK = "gradscope.report/1"
GRAPH = "gradscope.graph/1"
SWEEP = "gradscope.sweep/1"
RUN = "gradscope.run/1"
# not a report: what --format json writes instead when a command ends with exit 2 or 3
ERROR = "gradscope.error/1"

NAMES: dict[str, str] = {CHECK: "check", GRAPH: "graph", SWEEP: "sweep", RUN: "run"}
EVERY: frozenset[str] = frozenset(NAMES)


def name_of(obj: Any) -> str:
    """'graph' for a graph report (its schema, where the kind is not one of gradscope's)."""
    schema = getattr(obj, "schema", "")
    return NAMES.get(schema, schema or type(obj).__name__)
