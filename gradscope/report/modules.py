"""The module roll-up of a model report: every module path among the checked tensors' names
(`blocks.2.attn` from `blocks.2.attn.qkv.weight`), with the worst status of the tensors under
it. Plain data in, plain data out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gradscope.report.model import Failure, InputReport
from gradscope.report.status import Status

MODEL_TENSORS = 8  # a report with more tensors than this is a model: summary first
# why a model at scale's tensor is inconclusive where its elements were not sampled and the
# projections' drill-down never reached it alone (features/projections.py says it; a model's
# summary gathers those tensors in one line where the drill-down placed the error elsewhere)
TOGETHER = "projected only together with others"


def is_model(roles: Mapping[str, str]) -> bool:
    """Whether a target's tensors (name → role) make a model report: a module parameter among
    them, or more tensors than a handful (a summary first, tables for the failing ones)."""
    return len(roles) > MODEL_TENSORS or any(r == "parameter" for r in roles.values())


def module_of(name: str) -> str:
    """`blocks.0.fc1.weight` → `blocks.0.fc1`; a plain input name → "" (the inputs)."""
    return name.rpartition(".")[0]


def _parts(name: str) -> list[str]:
    """`blocks.0.fc1.weight` → [blocks, 0, fc1]; a plain input name → []."""
    path = module_of(name)
    return path.split(".") if path else []


def rollup(inputs: list[InputReport]) -> list[dict[str, Any]]:
    """Per module path (each prefix of a tensor's module, the root "" holding the plain
    inputs): its status (the worst of its tensors'), tensors, and elements compared / all."""
    found: dict[str, dict[str, Any]] = {}
    first: dict[str, tuple[int, int]] = {}  # where a module first appears, and its depth
    for position, item in enumerate(inputs):
        parts = _parts(item.name)
        for k in range(len(parts) + 1):
            key = ".".join(parts[:k])
            first.setdefault(key, (position, k))
            entry = found.setdefault(key, {"module": key, "status": Status.OK, "tensors": 0,
                                           "checked": 0, "total": 0, "failing": []})
            entry["tensors"] += 1
            entry["checked"] += item.checked
            entry["total"] += item.total
            if item.status.rank > entry["status"].rank:
                entry["status"] = item.status
            if item.status.fails:
                entry["failing"].append(item.name)
    # in the order the tensors come (named_parameters: definition order), parents first
    return sorted(found.values(), key=lambda e: first[e["module"]])


def together(inputs: list[InputReport], failures: list[Failure]) -> set[str]:
    """The tensors a failing model's summary says in one line: inconclusive only because they
    were projected together with others, where the drill-down placed the error at a tensor
    that mismatches (so they say nothing a reader needs, one row each)."""
    if not any(i.status == Status.MISMATCH for i in inputs):
        return set()
    return {f.subject for f in failures
            if f.kind == Status.INCONCLUSIVE and f.detail.startswith(TOGETHER)}


def forward_sorted(inputs: list[InputReport], order: list[str]) -> list[InputReport]:
    """The tensors in the order the forward used their modules (`order`: module paths as the
    forward first ran them; a tensor whose module did not run itself goes with its nearest
    enclosing one that did), parameter order within a module and without an order."""
    names = in_forward_order([i.name for i in inputs], order)
    by_name = {i.name: i for i in inputs}
    return [by_name[n] for n in names] if len(by_name) == len(inputs) else list(inputs)


def in_forward_order(names: list[str], order: list[str]) -> list[str]:
    """Tensor names in forward order (see forward_sorted)."""
    rank = {m: k for k, m in enumerate(order)}

    def key(name: str) -> int:
        parts = _parts(name)
        for depth in range(len(parts), -1, -1):
            if ".".join(parts[:depth]) in rank:
                return rank[".".join(parts[:depth])]
        return -1  # a plain input: used first
    return sorted(names, key=key) if order else list(names)


def wrong_from(inputs: list[InputReport], order: list[str] | None = None
               ) -> tuple[str, str | None, int] | None:
    """Where wrong gradients start: the failing tensor last in forward order (wrong
    gradients flow backward, so every tensor before a bug inherits it), the passing tensor
    after it (the bug sits between the two), and how many failing tensors come before it.
    Without `order` (module paths as the forward ran them), parameter order stands in."""
    inputs = forward_sorted(inputs, order or [])
    failing = [k for k, i in enumerate(inputs) if i.status == Status.MISMATCH]
    if not failing or len(inputs) <= MODEL_TENSORS:
        return None
    last = failing[-1]
    after = next((i.name for i in inputs[last + 1:] if i.status == Status.OK), None)
    return inputs[last].name, after, len(failing) - 1


def grouped(names: list[str], limit: int = 8) -> str:
    """Tensor names for one line: as they are when few, else grouped by module, one level
    shallower at a time until at most `limit` groups are left
    (`blocks.0 (12 tensors), blocks.1.fc1.weight, x`)."""
    if len(names) <= 4:
        return ", ".join(names)
    depth = max(len(_parts(n)) for n in names)
    while True:
        groups: dict[str, list[str]] = {}
        for name in names:
            parts = _parts(name)
            key = ".".join(parts[:depth]) if parts else name
            groups.setdefault(key, []).append(name)
        if len(groups) <= limit or depth <= 1:
            break
        depth -= 1
    return ", ".join(f"{m} ({len(n)} tensors)" if len(n) > 1 else n[0]
                     for m, n in groups.items())
