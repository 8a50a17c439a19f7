"""A notebook executed headless, as Jupyter runs a user's cells: every cell shows exactly what
it returns (one report, one picture) or its one failure — gradscope's own consoles never
display into the cell — and the pictures name cells the notebook way and scale to the cell."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow  # (one Jupyter kernel for all its tests: seconds to start)

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

DEFINE = '''import torch, gradscope
class MyBug(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x
torch.manual_seed(0)
x = torch.randn(3, dtype=torch.float64, requires_grad=True)
m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)).double()'''

CELLS = [
    DEFINE,
    "gradscope.gradcheck(MyBug.apply, x)",
    "gradscope.gradcheck(MyBug.apply, x, raise_exception=False)",
    "r = gradscope.check('a*b', shape=(3,)); t = r.to_text(); r.to_markdown(); len(t) > 0",
    "gradscope.check(MyBug.apply, x)",
    "gradscope.graph(lambda a: MyBug.apply(m(a)).sum(),\n"
    "                torch.randn(3, dtype=torch.float64))",
    "gradscope.sweep('a*b + sin(a)', var='a', range=(-1, 1), points=11)",
    "gradscope.check(m, torch.randn(2, 3, dtype=torch.float64))",
]


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    runtime = tmp_path_factory.mktemp("jupyter")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
        patch.setenv("JUPYTER_PLATFORM_DIRS", "1")
        book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
        nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                                allow_errors=True).execute()
    return [cell.outputs for cell in book.cells]


def _kinds(outputs) -> list[str]:
    return [o.output_type for o in outputs if o.output_type != "stream"]


def test_a_failing_drop_in_shows_its_one_failure(cells):
    assert _kinds(cells[1]) == ["error"]
    assert cells[1][-1].ename == "GradcheckError"
    assert _kinds(cells[2]) == ["execute_result"]  # raise_exception=False: False, nothing else
    assert cells[2][-1].data["text/plain"] == "False"


def test_rendering_a_report_as_text_displays_nothing(cells):
    assert _kinds(cells[3]) == ["execute_result"] and cells[3][-1].data["text/plain"] == "True"


def test_a_report_shows_once_with_its_culprit_named_the_notebook_way(cells):
    assert _kinds(cells[4]) == ["execute_result"]
    html = cells[4][0].data["text/html"]
    assert "MyBug.backward" in html and "Cell In[" in html


def test_the_graph_scales_to_the_cell_and_names_cells_as_the_notebook_does(cells):
    assert _kinds(cells[5]) == ["execute_result"]
    html = cells[5][0].data["text/html"]
    assert re.search(r'<svg [^>]*width="100%"', html) and "<?xml" not in html
    assert "Cell In[" in html and "MyBug.backward (Cell In[" in html
    assert not re.search(r"\d{6,}\.py", html)  # never the kernel's temp file
    assert "‖" in html  # the gradient figures per node


def test_the_sweep_and_a_models_flow_show_as_pictures(cells):
    assert _kinds(cells[6]) == ["execute_result"]
    assert re.search(r'<svg [^>]*width="100%"', cells[6][0].data["text/html"])
    assert _kinds(cells[7]) == ["execute_result"]
    assert cells[7][0].data["text/html"].count("<svg") == 1  # tables and the flow picture
