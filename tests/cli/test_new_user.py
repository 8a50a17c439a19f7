"""What a new user meets doing the seeds' scenarios on the command line: one right line per
mistake, the sweep's words and the header's inputs in plain terms."""

from __future__ import annotations

import json

from tests.command import run
from tests.paths import DATA

SEEDS = f"{DATA}/seed_layers.py"


def test_a_backward_returning_too_few_gradients_is_one_line(capsys):
    code, out, _ = run(capsys, "check", f"{SEEDS}:TooFew")
    assert code == 1
    said = ("TooFew.backward (seed_layers.py:45) returned 1 gradient(s) but forward took 2 "
            "input(s)")
    verdict = [line for line in out.splitlines() if line.startswith("FAILED")]
    assert verdict and said in " ".join(out.split())
    assert "— " not in out and out.count("mismatch") <= 4  # no table of dashes per element
    assert len(out.splitlines()) < 30
    code, md, _ = run(capsys, "check", f"{SEEDS}:TooFew", "--format", "markdown")
    assert "| index |" not in md and said in md


def test_markdown_statuses_are_bold_not_escaped(capsys):
    _, md, _ = run(capsys, "check", f"{SEEDS}:ClampGradient", "--format", "markdown")
    assert "| **mismatch** |" in md and r"\*\*" not in md


def test_the_header_says_drawn_inputs_in_words(capsys):
    _, out, _ = run(capsys, "check", "x * y")
    assert "spread(25) over ±6.37, shuffled (seed " in out and "torch.randperm" not in out
    _, data, _ = run(capsys, "check", "x * y", "--json")
    first = json.loads(data)["inputs"][0]
    assert "torch.randperm(25" in first["origin"]  # the JSON keeps the call that remakes it
    assert first["described"].startswith("spread(25) over ±6.37, shuffled (seed ")


def test_inputs_given_by_at_get_no_arg_hint(capsys, tmp_path):
    code = tmp_path / "two.py"
    code.write_text("def f(input1, input2):\n    return input1 * input2\n")
    status, _, err = run(capsys, "check", f"{code}:f", "--at", "input1=1,2", "--at",
                         "input2=3,4,5")
    assert status == 3 and "must match the size" in err and "--arg" not in err
    status, _, err = run(capsys, "check", f"{code}:f", "--at", "input1=1,2,3", "--shape",
                         "input2=4")
    assert status == 3 and "--arg" not in err


def test_a_typeerror_in_init_gets_its_own_hint_not_super_init(capsys, tmp_path):
    code = tmp_path / "layer.py"
    code.write_text("import torch\nclass MyLayer(torch.nn.Module):\n    def __init__(self):\n"
                    "        mytensor = torch.tensor(3,3)\n"  # and no super().__init__()
                    "        self.mytensor = torch.nn.Parameter(mytensor)\n"
                    "    def forward(self, input):\n        return input * self.mytensor\n")
    status, _, err = run(capsys, "check", f"{code}:MyLayer")
    assert status == 3 and "TypeError: tensor() takes 1 positional argument" in err
    assert "torch.empty(3, 3)" in err and "did you call super" not in err
    assert err.index("torch.empty(3, 3)") < err.index("then: __init__ never calls super")
    code.write_text(code.read_text().replace("torch.tensor(3,3)", "torch.rand(3, 3)"))
    status, _, err = run(capsys, "check", f"{code}:MyLayer")
    assert status == 3 and "super().__init__()" in err  # the next mistake, named right


def test_the_sweep_says_where_the_clamp_bug_parts(capsys):
    code, out, _ = run(capsys, "sweep", f"{SEEDS}:ClampGradient", "--var", "x", "--range",
                       "-1,2", "--points", "61")
    assert code == 0
    assert "part on x ∈ [1, 2] (21 points): autograd ≈ 1, finite differences ≈ 0" in out
    assert "follow each other" not in out
