"""The JSON Schema of [tool.gradscope]: every key the config reads, with its types and choices;
the example config satisfies it and a misspelled key does not."""

from __future__ import annotations

import json

from gradscope.options import SPECS
from gradscope.suite.config import check_fields, fields
from gradscope.suite.schema import schema
from tests.command import run


def _table():
    return schema()["properties"]["tool"]["properties"]["gradscope"]


def test_every_key_the_config_reads_is_in_the_schema():
    table = _table()
    assert set(table["properties"]) == set(fields()) | {"checks"}
    check = table["properties"]["checks"]["items"]
    assert set(check["properties"]) == set(check_fields()) and check["required"] == ["target"]
    assert check["properties"]["dtype"]["enum"] == list(SPECS["dtype"].choices)
    assert check["properties"]["at"]["type"] == "object"
    assert check["properties"]["eps"]["type"] == "number"
    assert check["properties"]["nondet_tol"]["type"] == "number"  # (a feature's own option)
    assert table["additionalProperties"] is False and check["additionalProperties"] is False


def test_the_cli_prints_it(capsys):
    code, out, _ = run(capsys, "run", "--config-schema")
    assert code == 0 and json.loads(out)["$schema"].startswith("http://json-schema.org/")


def test_the_example_config_uses_only_keys_the_schema_knows():
    from gradscope.suite.config import tomllib  # (tomli before Python 3.11)
    from tests.paths import EXAMPLES

    table = tomllib.loads((EXAMPLES / "ci" / "pyproject.toml").read_text())["tool"]["gradscope"]
    known = _table()["properties"]
    allowed = known["checks"]["items"]["properties"]
    assert set(table) <= set(known)
    for check in table["checks"]:
        assert set(check) <= set(allowed)
    assert "atoll" not in allowed and "checks" not in allowed
