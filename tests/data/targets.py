"""Targets that go wrong in the ways the bad-input catalogue (README "Errors") lists."""



def returns_tuple(x):
    return x * 2, x * 3


def returns_number(x):
    return 1.5


def forward_raises(x):
    return x.reshape(7, 7)


def detached(x):
    return x.detach() * 2
