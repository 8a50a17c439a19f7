"""The expression language: text → IR (parse), the op table, and the two builders (torch, sympy)."""
