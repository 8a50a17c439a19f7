"""The command line."""

from gradscope.cli.app import app, entry, main

__all__ = ["app", "entry", "main"]
