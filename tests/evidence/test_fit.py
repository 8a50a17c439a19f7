"""A model whose float64 check would not fit in the device's free memory is checked in its own
dtype — autograd and finite differences alike — with a note giving both figures; where it
fits, or the parameters are not of one lower dtype, nothing changes."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.evidence import fit

GPT = "tests/data/gpt.py"
TOKENS = {"tokens": "randint(0,97,(2,9))"}
CPU = torch.device("cpu")


def _params(*dtypes: torch.dtype, n: int = 1000) -> dict[str, torch.Tensor]:
    return {f"p{i}": torch.zeros(n, dtype=d) for i, d in enumerate(dtypes)}


def test_a_float32_model_too_large_for_float64_runs_in_float32(monkeypatch):
    monkeypatch.setattr(fit, "available", lambda device: 10_000)
    found = fit.fitted(_params(torch.float32, torch.float32), "float64", CPU)
    assert found is not None and found.dtype == "float32"
    assert "2,000 elements" in found.note and "float64 check" in found.note


@pytest.mark.parametrize("params, dtype", [
    (_params(torch.float32), "float32"),  # asked in another dtype already
    (_params(torch.float64), "float64"),  # float64 parameters: nothing lower to run in
    (_params(torch.float32, torch.bfloat16), "float64"),  # no one dtype of their own
    ({}, "float64"),  # no parameters
])
def test_nothing_changes_where_there_is_no_one_lower_dtype_to_run_in(monkeypatch, params,
                                                                    dtype):
    monkeypatch.setattr(fit, "available", lambda device: 0)
    assert fit.fitted(params, dtype, CPU) is None


def test_a_model_that_fits_stays_in_float64(monkeypatch):
    monkeypatch.setattr(fit, "available", lambda device: 1 << 40)
    assert fit.fitted(_params(torch.float32), "float64", CPU) is None
    monkeypatch.setattr(fit, "available", lambda device: None)  # nobody says: as asked
    assert fit.fitted(_params(torch.float32), "float64", CPU) is None


def test_the_free_memory_is_read_from_meminfo(monkeypatch, tmp_path):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24000000 kB\nMemAvailable:    2000000 kB\n")
    monkeypatch.setattr(fit, "MEMINFO", info)
    assert fit.available(CPU) == 2_000_000 * 1024
    info.write_text("MemTotal: 1 kB\n")
    assert fit.available(CPU) is None
    monkeypatch.setattr(fit, "MEMINFO", tmp_path / "absent")
    assert fit.available(CPU) is None


@pytest.mark.slow
def test_end_to_end_the_check_runs_in_the_models_dtype_and_leaves_the_model_alone(
        monkeypatch):
    monkeypatch.setattr(fit, "available", lambda device: 1000)
    from tests.data import gpt  # (the module the check's file loads: the user's model)

    before = {n: p.detach().clone() for n, p in gpt.tiny.named_parameters()}
    report = gradscope.check(f"{GPT}:tiny_loss", const=TOKENS)
    assert report.passed
    assert any("checked in float32, the parameters' own dtype" in n for n in report.notes)
    assert report.dtype == "float32"
    for name, p in gpt.tiny.named_parameters():  # (the copy shared their storage, unwritten)
        assert p.dtype == torch.float32 and torch.equal(p.detach(), before[name])


@pytest.mark.slow
def test_end_to_end_a_wrong_function_is_still_found(monkeypatch):
    # the RMSNorm whose weight's gradient comes from the unnormalised input: its own check in
    # place (float64 per call) and the model's gradient in float32 both see it
    monkeypatch.setattr(fit, "available", lambda device: 1000)
    report = gradscope.check("tests/data/llama.py:tiny_off_loss",
                             const={"tokens": "randint(0,61,(2,9))"})
    assert not report.passed and report.dtype == "float32"
    (check,) = [c for c in report.upstream_checks if "checked in place" in c.label]
    assert check.label.startswith("RMSNormOff.backward (llama.py:") and not check.passed


def test_the_note_gives_both_figures_in_a_readable_unit(monkeypatch):
    monkeypatch.setattr(fit, "available", lambda device: 3 << 30)
    found = fit.fitted(_params(torch.float32, n=100_000_000), "float64", CPU)
    assert "about 3.7 GiB beside the model and cpu has 3.0 GiB free" in found.note
    monkeypatch.setattr(fit, "available", lambda device: 1 << 20)
    found = fit.fitted(_params(torch.float32, n=100_000), "float64", CPU)
    assert "about 3.8 MiB beside the model and cpu has 1.0 MiB free" in found.note
