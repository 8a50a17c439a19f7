"""The expression language on PyTorch's own op database: a stratified sample of OpInfo's ops
(every STRIDE-th by name), each spelled as torch users write it on OpInfo's own float64
samples. No accepted op may fail or crash (the three engines agree on every one gradscope
builds), and the share accepted must not fall. benchmarks/spelled.py runs the whole database."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("expecttest")  # (torch's testing internals import it)

from benchmarks import spelled

pytestmark = pytest.mark.slow  # (every op of the table, built and checked)

STRIDE = 3  # 180 of the 540 ops, spread over every kind the database groups by name


@pytest.fixture(scope="module")
def rows():
    torch.set_num_threads(1)
    return [spelled.judge(op, 2) for op in spelled.checkable_ops(stride=STRIDE)]


def test_no_op_gradscope_builds_fails_or_crashes(rows):
    bad = [(r.op, r.text, r.detail) for r in rows if r.outcome in ("fails", "error")]
    assert not bad, bad


def test_the_share_accepted_does_not_fall(rows):
    agree = sum(r.outcome == "agree" for r in rows)
    assert agree >= 0.65 * len(rows), (agree, len(rows))  # the whole database: 401 of 540


def test_a_spelling_is_the_one_users_write():
    from torch.testing._internal.common_methods_invocations import op_db

    (linear,) = [op for op in op_db if op.name == "nn.functional.linear"]
    sample = next(iter(linear.sample_inputs("cpu", torch.float64, requires_grad=True)))
    written = spelled.spell(linear, sample)
    assert written.text.startswith("F.linear(a, b")
    assert set(written.at) <= {"a", "b", "c"}
