"""What a rank reads from its launcher and from the code: its place in the world from
torchrun's or srun's environment, the sharding the code declares, the wrapper that replicates;
and the framing of its messages (a size bound and a deadline inside a read)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gradscope.errors import UsageError
from gradscope.targets.distributed.place import first_host, place
from gradscope.targets.distributed.rank import _said, _wrapper

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.2",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc"}


def test_torchruns_environment_places_the_process():
    where = place(TORCHRUN)
    assert (where.rank, where.size, where.local_rank) == (3, 4, 1)
    assert (where.addr, where.port, where.launcher) == ("10.0.0.2", 29500, "torchrun")


def test_a_plain_process_has_no_place():
    assert place({}) is None
    assert place({"RANK": "0"}) is None  # (half an environment: no launcher made it)
    assert place({"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}) is None  # a batch script's


def test_sruns_environment_places_the_process_with_rank_0s_host_from_the_node_list():
    env = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "8", "SLURM_LOCALID": "1",
           "SLURM_JOB_NODELIST": "gpu[03-06]", "SLURM_JOB_ID": "123456"}
    where = place(env)
    assert (where.rank, where.size, where.local_rank) == (5, 8, 1)
    assert where.addr == "gpu03" and where.port == 10000 + 123456 % 20000
    assert where.launcher == "srun"
    assert place({**env, "MASTER_ADDR": "head", "MASTER_PORT": "4000"}).addr == "head"


def test_srun_without_a_node_list_or_master_addr_is_a_usage_error():
    with pytest.raises(UsageError, match="MASTER_ADDR"):
        place({"SLURM_PROCID": "0", "SLURM_NTASKS": "2"})


def test_a_launcher_value_that_is_no_number_is_said():
    with pytest.raises(UsageError, match="RANK='x'"):
        place({**TORCHRUN, "RANK": "x"})


@pytest.mark.parametrize("nodes, first", [("gpu[03-05,9],cpu1", "gpu03"), ("node1", "node1"),
                                          ("a-b[7,9]", "a-b7"), ("n1,n2", "n1"), ("", "")])
def test_the_first_host_of_a_slurm_host_list(nodes, first):
    assert first_host(nodes) == first


def test_megatrons_attribute_says_sharded():
    layer = nn.Linear(2, 2)
    layer.weight.tensor_model_parallel = True
    said = _said(layer, {"weight": layer.weight, "bias": layer.bias})
    assert said == {"weight": "sharded: it has tensor_model_parallel = True"}


def test_no_wrapper_on_a_plain_module():
    assert _wrapper(nn.Sequential(nn.Linear(2, 2))) == "" and _wrapper(None) == ""


def test_ddp_and_fsdp_wrappers_are_recognised_by_class():
    class FSDPModule(nn.Module):  # (fully_shard makes the module's class a subclass of it)
        pass

    class Wrapped(FSDPModule):
        pass

    assert _wrapper(nn.Sequential(Wrapped())) == "fully_shard (FSDP2)"


class _Work:
    def __init__(self, fill=None, done=True):
        self.fill, self.done = fill, done

    def wait(self, timeout=None):
        return self.done


def _world():
    from gradscope.targets.distributed.world import World

    return World.__new__(World)


def test_a_reply_past_the_size_bound_is_refused_before_anything_is_buffered(monkeypatch):
    import torch.distributed as dist

    def irecv(tensor, src, group):
        tensor.fill_(1 << 62)
        return _Work()

    monkeypatch.setattr(dist, "irecv", irecv)
    with pytest.raises(EOFError, match="at most"):
        _world()._receive(1, None, 1.0)


def test_a_reply_that_never_comes_is_a_timeout(monkeypatch):
    import torch.distributed as dist

    monkeypatch.setattr(dist, "irecv", lambda tensor, src, group: _Work(done=False))
    with pytest.raises(TimeoutError):
        _world()._receive(1, None, 0.01)
    assert torch.get_num_threads() >= 1
