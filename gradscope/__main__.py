"""`python -m gradscope` runs the CLI."""

from gradscope.cli import entry

entry()
