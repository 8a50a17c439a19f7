"""Every kind of target satisfies the one Target protocol."""

from gradscope.targets import SecondOrderTarget, resolve
from gradscope.targets.base import Target
from tests.paths import DATA, EXAMPLES


def test_every_target_kind_is_a_target():
    targets = [resolve("sin(x) * y"), resolve(f"{DATA}/functions.py:quantise"),
               resolve(f"{EXAMPLES}/seed_functions.py:KillHead", args={"n": 2}),
               SecondOrderTarget(resolve("x ** 3"))]
    for target in targets:
        assert isinstance(target, Target), target
        assert target.names and set(target.roles()) == set(target.names)
