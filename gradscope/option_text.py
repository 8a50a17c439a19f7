"""The text forms of options, read without torch: NAME=VALUE items, shapes, Python literals
(`--arg`, `--init`), and the limits they are checked against. VALUE text itself becomes a tensor
in `inputs.text`."""

from __future__ import annotations

import ast
import keyword
import math
import re
from dataclasses import dataclass
from typing import Any

from gradscope.errors import UsageError

MAX_ELEMENTS = 20_000_000  # default --max-elements-total: per tensor and over a run's inputs
MAX_DIMS = 8
GENERATORS = ("spread", "randn", "rand", "uniform", "randint", "ones", "zeros", "linspace",
              "arange")
FORMS = ("a number (1.5), a comma list (1,2,3), a nested list ([[1,2],[3,4]]) or a generator: "
         + ", ".join(f"{g}(...)" for g in GENERATORS))
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*\Z")  # dotted: module parameters


def parse_assignment(text: str, option: str) -> tuple[str, str]:
    """`NAME=VALUE` → (NAME, VALUE)."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise UsageError(f"{option} {text!r}: expected NAME=VALUE, e.g. {option} x=1,2,3")
    if not value.strip():
        raise UsageError(f"{option} {text!r}: the value after '=' is empty; it can be {FORMS}")
    return name, value.strip()


def parse_shape(text: str, option: str = "--shape") -> tuple[int, ...]:
    """`2,3` → (2, 3); `()` or `scalar` → ()."""
    t = text.strip()
    if t in ("()", "scalar", "[]"):
        return ()
    parts = [p.strip() for p in t.strip("()[]").split(",")]
    if parts and parts[-1] == "":
        parts.pop()
    if not parts or not all(re.fullmatch(r"\d+", p) for p in parts):
        raise UsageError(f"{option} {text!r}: a shape is whole numbers separated by commas, "
                         "e.g. 2,3 (or () for a scalar)")
    shape = tuple(int(p) for p in parts)
    check_shape(shape, f"{option} {text}")
    return shape


def check_shape(shape: tuple[int, ...], what: str, limit: int = MAX_ELEMENTS) -> None:
    if len(shape) > MAX_DIMS:
        raise UsageError(f"{what}: at most {MAX_DIMS} dimensions are supported")
    if any(n == 0 for n in shape):
        raise UsageError(f"{what}: a dimension of size 0 makes an empty tensor, which has no "
                         "gradient to check")
    total = math.prod(shape)
    if total > limit:
        raise UsageError(f"{what}: {total:,} elements is more than the limit of {limit:,} "
                         "(--max-elements-total)")


@dataclass(frozen=True)
class TopLevel:
    """`--arg model=net`: the nn.Module named `net` at the top level of the target's own file
    (looked up once the file is loaded, never evaluated; nothing else is reached by name)."""

    name: str


def shortened(text: str, width: int = 60) -> str:
    """User text as a message quotes it: at most `width` characters."""
    return text if len(text) <= width else text[:width - 3] + "..."


def parse_literal(text: str, what: str, names: bool = False) -> Any:
    """A Python literal for --arg / --init (numbers, strings, tuples, lists, dicts, None);
    with `names`, a bare identifier is a TopLevel name instead."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        if names and text.strip().isidentifier() and not keyword.iskeyword(text.strip()):
            return TopLevel(text.strip())
        allowed = ", or the name of an nn.Module defined at the top of the target's file" \
            if names else ""
        raise UsageError(f"{what}: {shortened(text)!r} is not a Python literal (numbers, strings, "
                         f"lists, tuples, dicts, True/False/None){allowed}") from None
