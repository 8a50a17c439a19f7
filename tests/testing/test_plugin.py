"""The pytest plugin offers assert_gradients as a fixture (installed via the entry point)."""

import pytest
import torch


def test_fixture_is_the_helper(assert_gradients):
    from gradscope.testing import assert_gradients as helper

    assert assert_gradients is helper
    assert assert_gradients("x * y", x=torch.ones(2), y=torch.ones(2)).passed


SUITE = '''
import torch


class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, g):
        return 4 * g  # (the derivative is 2x: wrong away from x = 2)


X = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)


def test_expects_the_false():
    assert not torch.autograd.gradcheck(Doubled.apply, (X,), raise_exception=False)


def test_fails():
    assert torch.autograd.gradcheck(Doubled.apply, (X,))
'''


@pytest.mark.slow
def test_the_summary_counts_failing_tests_as_pytest_does(tmp_path):
    # (a call whose False its test expects fails that call, not the test)
    import subprocess
    import sys

    (tmp_path / "test_suite.py").write_text(SUITE)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-p", "no:randomly", "--gradscope", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path).stdout
    assert "1 failed, 1 passed" in out, out
    assert ("1 failed with an explanation (failing 1 test(s)), 1 returned False to the test "
            "that asked (raise_exception=False: the test decides)") in out, out
