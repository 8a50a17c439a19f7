"""gradscope in test suites: `assert_gradients` (assertions.py) and the pytest plugin
(plugin.py, entry point `gradscope`) that offers it as a fixture.

    from gradscope.testing import assert_gradients
"""

from gradscope.testing.assertions import assert_gradients, failing_text

__all__ = ["assert_gradients", "failing_text"]
