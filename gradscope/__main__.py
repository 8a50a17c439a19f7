"""`python -m gradscope` runs the CLI."""

from gradscope.cli.app import entry

entry()
