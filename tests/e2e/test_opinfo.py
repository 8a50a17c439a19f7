"""The drop-in on PyTorch's own op database (OpInfo), called as torch's gradient tests call
it: a stratified sample of the ops (every STRIDE-th by name), fast and slow mode. Every call
torch's gradcheck passes must pass gradscope's (strict mode off), and a 0.1 % error injected
into every op's backward must be named by gradscope (a failure or a GradscopeWarning) where
torch's tolerance lets it through. benchmarks/opinfo.py runs the whole database."""

from __future__ import annotations

import pytest
import torch

from benchmarks import opinfo

STRIDE = 16  # ~34 of the ~540 ops, spread over every kind the database groups by name


@pytest.fixture(scope="module")
def ops():
    torch.set_num_threads(1)
    return opinfo.checkable_ops(stride=STRIDE)


@pytest.mark.slow
def test_every_call_torch_passes_gradscope_passes(ops):
    rows = list(opinfo.run(ops, samples=1, modes=["fast", "slow"]))
    both = [r for r in rows if r.torch == r.gradscope == "pass"]
    assert len(both) >= 40, len(both)  # the sample really ran
    divergent = [(r.op, r.mode, r.gradscope) for r in rows if r.diverges]
    assert not divergent, divergent
    warned = [(r.op, r.mode) for r in rows if r.warned]
    assert not warned, warned  # correct ops: no disagreement inside torch's tolerance either


def test_an_injected_tenth_of_a_percent_is_named_where_torch_passes(ops):
    rows = [r for r in opinfo.run(ops[::2], samples=1, modes=["fast"], inject=1.001)
            if r.torch == "pass" and not r.delegated and r.matters]
    assert len(rows) >= 8, len(rows)
    missed = [r.op for r in rows if r.gradscope == "pass" and not r.warned]
    assert not missed, missed
