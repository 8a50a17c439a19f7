"""JSON: plain structures with non-finite numbers spelled as strings, never NaN literals."""

import json
import math

from gradscope.render.json import dumps, encode


def test_non_finite_numbers_become_strings_everywhere():
    data = {"a": [1.0, math.nan, {"b": (math.inf, -math.inf)}]}
    assert encode(data) == {"a": [1.0, "nan", {"b": ["inf", "-inf"]}]}
    assert json.loads(dumps(data)) == encode(data)
