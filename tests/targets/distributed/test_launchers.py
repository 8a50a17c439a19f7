"""The three ways in, one code path: `--nproc N` (torch's elastic launch, started by gradscope),
`torchrun … -m gradscope check` on one node or several (two agents on 127.0.0.1 simulate two
nodes: world size 4), and srun (SLURM's environment, simulated: every task runs gradscope).
Every rank runs the check, rank 0 alone writes the report, every rank exits with its code."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from contextlib import closing

import pytest

from tests.paths import DATA, ROOT
from tests.targets.distributed.test_launch import none_left

PAR = f"{DATA}/parallel.py"
EXAMPLE = f"{ROOT}/examples/distributed.py"


def _port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRADSCOPE_", "SLURM_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _torchrun(*args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", *args]


def _documents(text: str) -> list[dict]:
    decoder, found, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        document, end = decoder.raw_decode(text, at)
        found.append(document)
        at = end
        while at < len(text) and text[at].isspace():
            at += 1
    return found


@pytest.mark.slow
def test_torchrun_on_one_node_runs_the_check_on_every_rank_and_rank_0_writes_it():
    done = subprocess.run(_torchrun("--standalone", "--nproc-per-node", "2", "-m", "gradscope",
                                    "check", f"{EXAMPLE}:BuggyParallelMLP", "--json"),
                          capture_output=True, text=True, timeout=300, env=_env(), cwd=ROOT)
    assert done.returncode == 1, done.stderr[-3000:]
    (report,) = _documents(done.stdout)  # one report: rank 0's
    assert report["passed"] is False
    culprits = [d for d in report["diagnostics"] if d["kind"] == "culprit"]
    assert culprits and culprits[0]["op"] == "CopyWithoutAllReduce.backward"
    assert any("under torchrun" in n for n in report["notes"])
    assert none_left()


@pytest.mark.slow
@pytest.mark.parametrize("name, code", [("ParallelMLP", 0), ("MLPReducesTwice", 1)])
def test_two_nodes_of_two_ranks_each_check_one_world_of_four(name, code):
    port = str(_port())
    agents = [subprocess.Popen(_torchrun("--nnodes", "2", "--node-rank", str(node),
                                         "--nproc-per-node", "2", "--master-addr",
                                         "127.0.0.1", "--master-port", port, "-m",
                                         "gradscope", "check", f"{PAR}:{name}", "--json"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=_env(), cwd=ROOT)
              for node in (0, 1)]
    outs = [a.communicate(timeout=400) for a in agents]
    assert [a.returncode for a in agents] == [code, code], outs[0][1][-3000:]
    (report,) = _documents(outs[0][0])
    assert outs[1][0].strip() == ""  # (node 1's ranks write nothing)
    names = [i["name"] for i in report["inputs"]]
    assert "fc1.weight@rank3" in names and "fc1.weight@rank0" in names
    assert report["passed"] is (code == 0)
    assert none_left()


@pytest.mark.slow
def test_srun_tasks_each_run_gradscope_and_rank_0_writes_the_report():
    port = str(_port())
    tasks = []
    for rank in range(2):
        env = {**_env(), "SLURM_PROCID": str(rank), "SLURM_NTASKS": "2",
               "SLURM_STEP_NUM_TASKS": "2", "SLURM_LOCALID": str(rank), "SLURM_JOB_ID": "77",
               "SLURM_JOB_NODELIST": "localhost", "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": port}
        tasks.append(subprocess.Popen([sys.executable, "-m", "gradscope", "check",
                                       f"{PAR}:MLPAveragesGradient", "--json"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env, cwd=ROOT))
    outs = [t.communicate(timeout=300) for t in tasks]
    assert [t.returncode for t in tasks] == [1, 1], outs[0][1][-3000:]
    (report,) = _documents(outs[0][0])
    assert outs[1][0].strip() == ""
    assert any("under srun" in n for n in report["notes"])
    assert any(d.get("factor") == pytest.approx(0.5) for d in report["diagnostics"])


@pytest.mark.slow
def test_nproc_that_is_not_the_launchers_world_is_refused_on_every_rank():
    # (torchrun's own parser takes --nproc for its --nproc-per-node: srun's form says it)
    port = str(_port())
    tasks = [subprocess.Popen([sys.executable, "-m", "gradscope", "check", f"{PAR}:ParallelMLP",
                               "--nproc", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT,
                              env={**_env(), "SLURM_PROCID": str(rank),
                                   "SLURM_STEP_NUM_TASKS": "2", "MASTER_ADDR": "127.0.0.1",
                                   "MASTER_PORT": port})
             for rank in range(2)]
    outs = [t.communicate(timeout=300) for t in tasks]
    assert [t.returncode for t in tasks] == [2, 2]
    said = "gradscope: error: --nproc 3: this process is one of 2 ranks srun started"
    assert said in outs[0][1] and said not in outs[1][1]  # (rank 0 says it)


@pytest.mark.slow
def test_a_script_torchrun_started_checks_on_every_rank_and_every_rank_gets_the_report(
        tmp_path):
    script = tmp_path / "check_ranks.py"
    script.write_text("import gradscope, torch.distributed as dist\n"
                      f"right = gradscope.check({PAR + ':ParallelMLP'!r}, nproc=2)\n"
                      f"wrong = gradscope.check({PAR + ':MLPReducesTwice'!r}, nproc=2)\n"
                      "print('rank', dist.get_rank(), right.passed, wrong.passed, flush=True)\n")
    done = subprocess.run(_torchrun("--standalone", "--nproc-per-node", "2", str(script)),
                          capture_output=True, text=True, timeout=300, env=_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(done.stdout.split("\n")[:2]) == ["rank 0 True False", "rank 1 True False"]
