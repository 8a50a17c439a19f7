"""What a rank reads from the code: the sharding it declares (Megatron's attribute, a DTensor's
placements), the wrapper that replicates."""

from __future__ import annotations

from torch import nn

from gradscope.targets.distributed.declared import said_of, wrapper_of


def test_megatrons_attribute_says_sharded():
    layer = nn.Linear(2, 2)
    layer.weight.tensor_model_parallel = True
    said = said_of(layer, {"weight": layer.weight, "bias": layer.bias})
    assert said == {"weight": "sharded: it has tensor_model_parallel = True"}


def test_no_wrapper_on_a_plain_module():
    assert wrapper_of(nn.Sequential(nn.Linear(2, 2))) == "" and wrapper_of(None) == ""


def test_ddp_and_fsdp_wrappers_are_recognised_by_class():
    class FSDPModule(nn.Module):  # (fully_shard makes the module's class a subclass of it)
        pass

    class Wrapped(FSDPModule):
        pass

    assert wrapper_of(nn.Sequential(Wrapped())) == "fully_shard (FSDP2)"
