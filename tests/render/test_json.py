"""JSON: plain structures with non-finite numbers spelled as strings, never NaN literals."""

import json
import math

from gradscope.render.json import dumps, encode


def test_non_finite_numbers_become_strings_everywhere():
    data = {"a": [1.0, math.nan, {"b": (math.inf, -math.inf)}]}
    assert encode(data) == {"a": [1.0, "nan", {"b": ["inf", "-inf"]}]}
    assert json.loads(dumps(data)) == encode(data)


def test_long_arrays_are_written_a_chunk_at_a_time_the_same_document(monkeypatch):
    import io
    import json as std

    from gradscope.render import json as writer

    values = [0.5, float("nan"), float("inf"), -float("inf"), 1e-300, 3, -2.25] * 40
    nested = [[1.0, float("nan")], [2.5, -float("inf")]] * 10
    document = {"schema": "x", "values": values, "nested": nested, "few": [1.0, 2.0]}
    whole = writer.dumps(document)
    monkeypatch.setattr(writer, "CHUNK", 7)  # (many chunks, one array)
    out = io.StringIO()
    writer.write(document, out)
    assert out.getvalue() == whole
    read = std.loads(whole)
    assert read["values"][:4] == [0.5, "nan", "inf", "-inf"] and read["values"][5] == 3
    assert read["nested"][0] == [1.0, "nan"] and read["nested"][1] == [2.5, "-inf"]
