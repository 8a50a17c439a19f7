"""Where a launcher put this process: its rank, world size, local rank and rank 0's address
from torchrun's or srun's environment; none in a plain process (or a batch script's shell)."""

from __future__ import annotations

import pytest

from gradscope.errors import UsageError
from gradscope.targets.distributed.place import first_host, place

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.2",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc"}


def test_torchruns_environment_places_the_process():
    where = place(TORCHRUN)
    assert (where.rank, where.size, where.local_rank) == (3, 4, 1)
    assert (where.addr, where.port, where.launcher) == ("10.0.0.2", 29500, "torchrun")


def test_a_plain_process_has_no_place():
    assert place({}) is None
    assert place({"RANK": "0"}) is None  # (half an environment: no launcher made it)
    assert place({"SLURM_PROCID": "0", "SLURM_NTASKS": "8"}) is None  # a batch script's shell
    assert place({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1"}) is None  # one task


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
        place({"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2"})


def test_a_launcher_value_that_is_no_number_is_said():
    with pytest.raises(UsageError, match="RANK='x'"):
        place({**TORCHRUN, "RANK": "x"})


@pytest.mark.parametrize("nodes, first", [("gpu[03-05,9],cpu1", "gpu03"), ("node1", "node1"),
                                          ("a-b[7,9]", "a-b7"), ("n1,n2", "n1"), ("", "")])
def test_the_first_host_of_a_slurm_host_list(nodes, first):
    assert first_host(nodes) == first
