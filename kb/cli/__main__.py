"""`python -m kb.cli` runs the kbq command line."""

from kb.cli.main import console

console()
