"""`gradscope ops` as a table and as JSON."""

import json

from rich.console import Console

from gradscope.render.ops import show, to_json
from gradscope.tools.ops import table


def test_the_table_lists_rows_with_their_kinks_and_domains():
    rows = table()
    data = json.loads(to_json(rows))
    assert data["schema"] == "gradscope.ops/1"
    by_name = {r["name"]: r for r in data["ops"]}
    assert by_name["log"]["domain"] == [0.1, 2.0] and by_name["abs"]["kinks"] == "kink"
    assert by_name["softmax"]["symbolic"] == "closed-form adjoint"
    assert by_name["add"]["spelling"] == "a + b, add(…)"
    assert by_name["pow"]["spelling"] == "a ** b, pow(…)"
    assert by_name["mse_loss"]["symbolic"] == "composed of other rows"
    console = Console(width=200, record=True, color_system=None)
    show(rows, console)
    assert "vanishing" in console.export_text()
