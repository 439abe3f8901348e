"""The command line: argv → an answer on stdout, errors on stderr, exit codes (see kb.cli.main)."""
