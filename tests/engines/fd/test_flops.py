"""The flop count without dynamo: the same numbers as torch's FlopCounterMode, no import of
torch._dynamo by a check that compiles nothing, torch's mode where dynamo is loaded."""

import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from gradscope.engines.fd import flops


def _torch_count(run):
    with FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


def _attention():
    q, k, v = (torch.randn(2, 3, 8, 4) for _ in range(3))
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _model():
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 6 * 6, 5))
    return net(torch.randn(3, 2, 8, 8)).sum()


@pytest.mark.parametrize("run", [
    lambda: torch.randn(3, 4) @ torch.randn(4, 5),
    lambda: torch.bmm(torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
    lambda: torch.einsum("bij,bjk->bik", torch.randn(2, 3, 4), torch.randn(2, 4, 5)),
    lambda: F.conv1d(torch.randn(1, 2, 9), torch.randn(3, 2, 3)),
    lambda: F.linear(torch.randn(5, 4), torch.randn(6, 4), torch.randn(6)),
    _attention,
    _model,
    lambda: torch.sin(torch.randn(10)).sum(),  # (elementwise: no flops counted by either)
], ids=["mm", "bmm", "einsum", "conv1d", "linear", "attention", "model", "elementwise"])
def test_counts_as_torch_counts(run):
    torch.manual_seed(0)
    assert flops.count(run) == _torch_count(run)


def test_the_result_of_the_counted_call_is_left_alone():
    seen = []
    assert flops.count(lambda: seen.append((torch.ones(2, 2) @ torch.ones(2, 2)).sum())) == 16
    assert seen == [torch.tensor(8.0)]


def test_an_error_of_the_call_reaches_the_caller():
    def fails():
        raise ValueError("the target's own")

    with pytest.raises(ValueError, match="the target's own"):
        flops.count(fails)


_FRESH = """
import sys
import gradscope
report = gradscope.check("tests/data/models.py:cnn_loss")
print(report.passed, "torch._dynamo" in sys.modules)
"""


@pytest.mark.slow
def test_a_model_check_does_not_import_dynamo():
    done = subprocess.run([sys.executable, "-c", _FRESH], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.stdout.split() == ["True", "False"], done.stderr[-2000:]


_COMPILES = """
import sys
import torch
from gradscope.engines.fd import flops

def run():
    f = torch.compile(lambda a, b: a @ b, backend="eager")
    return f(torch.randn(3, 4), torch.randn(4, 5))

print(flops.count(run), "torch._dynamo" in sys.modules)
"""


@pytest.mark.slow
def test_a_call_that_compiles_is_counted_by_torchs_mode():
    done = subprocess.run([sys.executable, "-c", _COMPILES], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.stdout.split() == ["120", "True"], done.stderr[-2000:]
