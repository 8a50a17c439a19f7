"""Draw the pictures docs/pictures/ shows — the backward graph of a notebook-style function with
a wrong custom backward, a sweep where autograd and finite differences part, a model's gradient
flow — as SVG, and as PNG screenshots where a headless Chromium is installed (Debian's
`chromium`): what a reader of the docs sees is what gradscope drew, looked at in a browser.

    python benchmarks/pictures.py            # writes docs/pictures/*.svg (and *.png)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import gradscope  # noqa: E402

OUT = ROOT / "docs" / "pictures"
BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(b)), None)


class MyBug(torch.autograd.Function):
    """x², whose backward forgets the 2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x


def pictures() -> dict[str, object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                torch.nn.Linear(4, 2)).double()

    def loss(a):
        return MyBug.apply(model(a)).sum()

    return {
        "graph": gradscope.graph(loss, torch.randn(3, dtype=torch.float64)),
        # (a path relative to the repository: the picture names its target as given)
        "sweep": gradscope.sweep("examples/buggy_functions.py:ClampSeeds", var="x",
                                 range=(-1, 2), points=61),
        "flow": gradscope.check(model, torch.randn(2, 3, dtype=torch.float64)).plot(),
    }


def screenshot(svg: Path, png: Path, width: int = 900) -> None:
    """The SVG as a browser shows it in a cell `width` pixels wide (its HTML wrapper)."""
    import re

    from gradscope.render.pictures import inline

    page = Path(tempfile.mkdtemp()) / "page.html"
    drawn = re.search(r'width="([\d.]+)" height="([\d.]+)"', svg.read_text())
    w, h = (float(v) for v in drawn.groups()) if drawn else (width, 1400.0)
    height = int(h * min(1.0, width / w)) + 16  # (the page no taller than the picture)
    page.write_text(f'<html><body style="margin:8px;width:{width}px">{inline(svg.read_text())}'
                    "</body></html>", encoding="utf-8")
    subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={png}", f"--window-size={width + 16},{height}",
                    "--hide-scrollbars", page.as_uri()], check=True, capture_output=True,
                   timeout=120)


def main() -> None:
    os.chdir(ROOT)
    OUT.mkdir(parents=True, exist_ok=True)
    for name, drawn in pictures().items():
        svg = OUT / f"{name}.svg"
        drawn.save(svg)
        print(f"wrote {svg.relative_to(ROOT)}")
        if BROWSER:
            screenshot(svg, svg.with_suffix(".png"))
            print(f"wrote {svg.with_suffix('.png').relative_to(ROOT)} ({BROWSER})")


if __name__ == "__main__":
    main()
