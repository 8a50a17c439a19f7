"""User code that changes a tensor autograd saved for backward: torch's error names only the
op's class ("output 0 of Sigmoid"); the user's line that saved it is what to look at,
and the line that changed it."""

import torch


def clobbered(x):
    y = x.sigmoid()
    y.mul_(2)  # sigmoid's backward needs its output, overwritten here
    return y.sum()


def cloned(x):
    y = x.sigmoid().clone()
    z = x.sigmoid()
    y.mul_(2)  # its own copy: nothing saved is changed
    return (y + z).sum()


def shifted(x):
    w = torch.full_like(x, 2.0)
    y = x * w
    w += 1  # mul's backward needs w for x's gradient
    return y.sum()


def through_data(x):
    y = x.sigmoid()
    y.data.mul_(2)  # no version check sees it: sigmoid's backward reads the doubled output
    return y.sum()


def through_data_before(x):
    y = x.sigmoid()
    z = torch.full_like(x, 2.0)
    z.data.mul_(2)  # before the mul that saves it: what it read is what its backward reads
    return (y * z).sum()


def through_detach(x):
    y = x.sigmoid()
    y.detach().mul_(2)  # shares y's version counter: torch's own check sees it
    return y.sum()
