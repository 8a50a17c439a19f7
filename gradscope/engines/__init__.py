"""The three independent engines: autograd, symbolic (sympy) and finite differences.

Engines do not print, know nothing of the CLI, and never call each other.
"""
