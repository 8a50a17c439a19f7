"""Models from a library nobody here wrote, installed from the package index: Hugging Face
`transformers` GPT-2 and BERT built from small configs (random weights, no download) — token
ids and labels given as data to forward's optional arguments, the loss picked from a
model-output object, GPT-2's tied embedding, dropout left on (refused with the advice) and off,
and a custom Function planted in one GPT-2 block, named with its file and line: the model's
own float32 comparisons agree within their tolerance, but with the Function's derivative in
place of its backward the model's gradient moves beyond it, which fails the run."""

from __future__ import annotations

import pytest
import torch

import gradscope
from gradscope.errors import UsageError
from tests.paths import DATA

pytest.importorskip("transformers")

MODELS = f"{DATA}/hf_models.py"


def _tokens(seed: int, padded: bool = False) -> torch.Tensor:
    ids = torch.randint(1, 64, (2, 8), generator=torch.Generator().manual_seed(seed))
    if padded:  # the second sequence is shorter: padded with the padding token 0
        ids[1, -3:] = 0
    return ids


def _check(name: str, padded: bool = False, **options):
    return gradscope.check(f"{MODELS}:{name}", output_key="loss",
                           const={"input_ids": _tokens(0, padded), "labels": _tokens(1)},
                           **options)


def test_dropout_left_on_is_refused_with_the_advice():
    with pytest.raises(UsageError, match=r"is random: .*--eval"):
        _check("gpt2")


@pytest.mark.slow
def test_gpt2_from_a_config_passes_with_its_tied_embedding_checked_once():
    report = _check("gpt2", mode="eval")
    assert report.passed, report.failures
    names = [i.name for i in report.inputs]
    assert "transformer.wte.weight" in names and "lm_head.weight" not in names
    assert sum(sum(i.status_counts.values()) for i in report.inputs) == 28_032  # each element


@pytest.mark.slow
def test_a_custom_function_planted_in_gpt2_is_named_with_its_line():
    # (the model computes in float32: its own comparisons agree within float32's tolerance;
    # the 1 % departure found in place is proven to reach the model's gradient, which fails)
    report = _check("gpt2_off", mode="eval")
    assert not report.passed
    (culprit,) = [d for d in report.diagnostics if d.kind == "culprit"]
    assert culprit.op.startswith("OffGELUFunction.backward (hf_models.py:")
    assert "1.01 × the derivative" in culprit.message
    assert "the target's gradient moves beyond its tolerance" in culprit.message
    (moved,) = [c for c in report.upstream_checks if "replaced by its forward's" in c.label]
    assert not moved.passed and "transformer.h.1.mlp.c_fc.weight" in moved.label
    # the block before the Function is reached; the head after it is not
    assert report["transformer.h.1.mlp.c_fc.weight"].status == "mismatch"
    assert report["transformer.ln_f.weight"].status == "ok"


@pytest.mark.slow
def test_bert_for_masked_lm_passes():
    report = _check("bert", mode="eval")
    assert report.passed, report.failures
    assert len(report.inputs) >= 40
    assert not [d for d in report.diagnostics if d.kind == "documented_departure"]


@pytest.mark.slow
def test_bert_on_a_padded_batch_passes_its_padding_row_named_as_torchs_departure():
    # nn.Embedding(padding_idx=0) gives row 0 no gradient through the lookup, while the tied
    # MLM decoder gives it one: autograd is not the derivative there, by torch's design
    report = _check("bert", padded=True, mode="eval")
    assert report.passed, report.failures
    (found,) = [d for d in report.diagnostics if d.kind == "documented_departure"]
    assert found.inputs == ["bert.embeddings.word_embeddings.weight"]
    assert "padding_idx=0" in found.message and "3 position(s)" in found.message
