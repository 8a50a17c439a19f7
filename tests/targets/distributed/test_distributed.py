"""The ranks' target is built on rank 0 of a running check, every rank's part with it; a
target no rank can build is said once, as one process says it, and leaves no process; the
package stays out of every run that does not ask for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gradscope
from gradscope.errors import TargetError, UsageError
from gradscope.options import Options
from gradscope.targets.distributed import start
from tests.paths import DATA, ROOT
from tests.targets.distributed.checked import children


def test_the_ranks_target_is_built_only_on_rank_0_of_a_running_check():
    with pytest.raises(UsageError, match="rank 0 of a running check"):
        start(f"{DATA}/parallel.py:rank_scaled", None, Options(nproc=2), 30.0)
    assert not children()


@pytest.mark.slow
def test_a_target_no_rank_can_build_is_a_usage_error_and_leaves_no_process():
    with pytest.raises(UsageError, match="no_such_name") as info:
        gradscope.check(f"{DATA}/parallel.py:no_such_name", nproc=2)
    assert "on rank" not in str(info.value)  # the same on every rank: said as one process says it
    assert not children()


@pytest.mark.slow
def test_user_code_that_raises_while_building_names_its_rank():
    with pytest.raises(TargetError, match=r"rank [01]: the target's own code raised"):
        gradscope.check(f"{DATA}/parallel.py:ParallelMLP", nproc=2, init={"hidden": "a"})
    assert not children()


@pytest.mark.slow
def test_a_check_without_nproc_never_imports_it():
    # (the mode's own module is light and always read; its ranks' machinery is not)
    code = ("import sys, gradscope; gradscope.check('x**2'); "
            "print(any(m in sys.modules for m in ('gradscope.targets.distributed.launch', "
            "'gradscope.targets.distributed.rank', 'gradscope.targets.distributed.target', "
            "'gradscope.targets.distributed.world', 'torch.distributed.launcher')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_a_script_that_checks_at_its_top_level_is_not_run_again_by_the_ranks(tmp_path):
    script = tmp_path / "train_check.py"
    script.write_text("import gradscope\nprint('ran')\n"
                      f"print(gradscope.check({str(DATA / 'parallel.py') + ':rank_scaled'!r}, "
                      "nproc=2).passed)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120).stdout
    assert out.split() == ["ran", "False"]  # printed once: the ranks never import __main__
