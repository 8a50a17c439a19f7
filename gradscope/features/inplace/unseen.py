"""An in-place change autograd never sees: a tensor that an op saved for its backward, changed
afterwards through an alias with a version counter of its own (`y.data.mul_(2)`): the version
check that turns `y.mul_(2)` into torch's "modified by an inplace operation" error cannot fire,
and that op's backward silently reads the changed value.

The watched forward (calls.py) records each in-place call on a tensor that does not require
grad (an alias outside the graph) with the user's line and the newest autograd node made
before it; after the forward, each node made before such a call that saved a tensor on the
same storage, still at the version it saved, is the call's victim. Said as a culprit only where
the target's own comparison fails (rule 1: it explains a failure, the line and the op)."""

from __future__ import annotations

import contextlib
import os
import traceback
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gradscope.report.model import Diagnostic
from gradscope.tensors import grad_nodes, own_work
from gradscope.usercode import (
    MAX_CHANGES,
    OURS,
    in_place,
    op_of,
    place,
    users_file,
    without_comment,
)

# torch's own frame between a Python-level call and a mode's handler
TORCH_DISPATCH = f"torch{os.sep}overrides.py"


@dataclass(frozen=True)
class Change:
    """One in-place call on a tensor outside the graph: its storage, the newest node's
    sequence number before it, the user's line."""

    storage: int
    after: int
    code: str
    function: str
    path: str
    line: int


@dataclass(frozen=True)
class Unseen:
    """A change no version check saw, of a tensor `op`'s backward saved."""

    change: Change
    op: str  # the op whose backward saved it ("Sigmoid")

    def diagnostic(self) -> Diagnostic:
        c = self.change
        where = place(c.path, c.line)
        alias = " through .data" if ".data" in c.code else ""
        message = (f"`{c.code}` (in {c.function}, {where}) changed in place{alias} a tensor "
                   f"{self.op}'s backward saved, where autograd does not see it (the change "
                   "moved no version counter it checks): that backward reads the changed "
                   "value, so the gradient through it is wrong")
        return Diagnostic(kind="culprit", op=f"`{c.code}`", where=where, inputs=[], count=0,
                          message=message,
                          hint=("change a copy (y = y * 2), or make the change before the op "
                                "that saves the tensor"),
                          summary=f"`{c.code}` ({where}) changed a tensor {self.op}'s backward "
                                  "saved, unseen by autograd")


class Watch(TorchFunctionMode):
    """In-place calls on tensors that do not require grad, from the user's own lines, and the
    newest autograd node each came after."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[Change] = []
        self.newest = -1

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None
                           ) -> Any:
        out = func(*args, **(kwargs or {}))
        if own_work():
            return out
        node = getattr(out, "grad_fn", None) if isinstance(out, torch.Tensor) else None
        if node is not None:
            self.newest = max(self.newest, node._sequence_nr())
        first = args[0] if args else None
        if type(first) is torch.Tensor and not first.requires_grad \
                and len(self.changes) < MAX_CHANGES and first.numel() and in_place(func):
            with contextlib.suppress(Exception):  # (watching never changes the forward)
                self._seen(first)
        return out

    def _seen(self, tensor: torch.Tensor) -> None:
        """The change, where the user's own line made it (not a library's in-place work on
        its buffers: FSDP's all-gather copies, an optimizer's): the call's caller is theirs."""
        frame = caller_frame()
        if frame is not None:
            self.changes.append(Change(tensor.untyped_storage().data_ptr(), self.newest,
                                       without_comment((frame.line or "").strip()),
                                       frame.name, frame.filename, frame.lineno or 0))


def caller_frame() -> traceback.FrameSummary | None:
    """The frame that made the torch call being handled, where it is the user's (None where a
    library — torch itself, FSDP — made it)."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith(OURS[0]) or frame.filename.endswith(TORCH_DISPATCH):
            continue  # (gradscope's own handler, torch's handle_torch_function)
        return frame if users_file(frame.filename) else None
    return None


def unseen(out: Any, changes: list[Change]) -> tuple[Unseen, ...]:
    """Each change of a tensor a node made before it saved (on the same storage), which the
    node still reads without complaint (its saved version is the tensor's); none where that
    cannot be read (it never stops the check)."""
    if not changes or not isinstance(out, torch.Tensor) or out.grad_fn is None:
        return ()
    try:
        return _unseen(out, changes)
    except Exception:
        return ()


def _unseen(out: torch.Tensor, changes: list[Change]) -> tuple[Unseen, ...]:
    by_storage: dict[int, list[Change]] = {}
    for c in changes:
        by_storage.setdefault(c.storage, []).append(c)
    found: dict[Change, Unseen] = {}
    for node in grad_nodes(out.grad_fn):
        for saved in _saved(node):
            for c in by_storage.get(saved.untyped_storage().data_ptr(), ()):
                if c not in found and node._sequence_nr() <= c.after:
                    found[c] = Unseen(c, op_of(node))
    return tuple(found.values())


def _saved(node: Any) -> list[torch.Tensor]:
    """The tensors a node saved that unpack without complaint (one changed where autograd saw
    it raises: torch's own error says so, at backward)."""
    out = []
    for name in dir(node):
        if not name.startswith("_saved_"):
            continue
        try:
            value = getattr(node, name)
        except Exception:  # (a saved tensor changed where autograd saw it, or freed)
            continue
        values = value if isinstance(value, tuple | list) else (value,)
        out += [v for v in values if type(v) is torch.Tensor and v.numel()]
    return out
