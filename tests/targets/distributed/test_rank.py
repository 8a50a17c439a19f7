"""What a rank reads from the code and sets for itself: torchrun's environment with gloo on
the loopback, the sharding the code declares, the wrapper that replicates."""

from __future__ import annotations

import os

import torch
from torch import nn

from gradscope.options import Options
from gradscope.targets.distributed.rank import LOOPBACK, RankSpec, _said, _wrapper, environment


def test_environment_is_torchruns(monkeypatch):
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    environment(1, RankSpec("x", None, Options(), 2, 29999, 5.0))
    assert os.environ["RANK"] == "1" and os.environ["LOCAL_RANK"] == "1"
    assert os.environ["WORLD_SIZE"] == "2" and os.environ["MASTER_PORT"] == "29999"
    assert os.environ["MASTER_ADDR"] == LOOPBACK == "127.0.0.1"


def test_megatrons_attribute_says_sharded():
    layer = nn.Linear(2, 2)
    layer.weight.tensor_model_parallel = True
    said = _said(layer, {"weight": layer.weight, "bias": layer.bias})
    assert said == {"weight": "sharded: it has tensor_model_parallel = True"}


def test_no_wrapper_on_a_plain_module():
    assert _wrapper(nn.Sequential(nn.Linear(2, 2))) == "" and _wrapper(None) == ""
    assert torch.get_num_threads() >= 1


def test_ddp_and_fsdp_wrappers_are_recognised_by_class():
    class FSDPModule(nn.Module):  # (fully_shard makes the module's class a subclass of it)
        pass

    class Wrapped(FSDPModule):
        pass

    assert _wrapper(nn.Sequential(Wrapped())) == "fully_shard (FSDP2)"
