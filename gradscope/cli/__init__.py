"""The command line: options → one library call → renderer → exit code. Nothing else.

app.py declares the commands (their options come from `gradscope.options.SPECS`),
commands.py runs each, output.py writes what they return, main.py is the process around it.
Imports stay light (typer only) so `gradscope --help` and `--version` never pay for torch.
"""

from gradscope.cli.app import app
from gradscope.cli.main import entry, main

__all__ = ["app", "entry", "main"]
