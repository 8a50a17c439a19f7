"""`python -m gradscope` runs the CLI."""

from gradscope._launch import entry

entry()
