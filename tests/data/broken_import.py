"""A module whose import raises (user code, exit 3)."""

raise ValueError("this module fails at import")
