"""The kinds of report, named by their schema: every object gradscope writes is one."""

from __future__ import annotations

import gradscope
from gradscope.api import graph
from gradscope.options import Options, Request
from gradscope.report import kinds


def test_each_report_object_is_a_named_kind():
    report = gradscope.check("x * y", x="1,2", y="3,4")
    drawn = graph(Request("check", "x * y", Options()))
    assert (report.schema, drawn.schema) == (kinds.CHECK, kinds.GRAPH)
    assert [kinds.name_of(o) for o in (report, drawn)] == ["check", "graph"]
    assert {kinds.CHECK, kinds.GRAPH, kinds.SWEEP, kinds.RUN} == kinds.EVERY


def test_a_foreign_object_is_named_by_what_it_is():
    assert kinds.name_of(object()) == "object"
