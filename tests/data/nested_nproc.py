"""A target file that runs a distributed check of its own at import (not under __main__):
in each rank of a distributed check of it, that would start ranks of its own."""

import gradscope

gradscope.check("tests/data/parallel.py:prints_on_every_rank", nproc=2)


def doubled(x):
    return x * 2
