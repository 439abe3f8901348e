"""`kbq validate`: check rule files, every error as file:line:col.

In: paths of rule files or directories (none: the shipped rules), read by click. Out: one line
per rules directory checked, or its errors on stderr and exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kb.cli.clicked import command
from kb.cli.declared import Command, Values, fail


def _validate(o: Values, words: list[str]) -> int:
    from kb.errors import KbError, RuleErrors
    from kb.knowledge.build import build
    from kb.paths import rules_dir

    paths = [Path(w) for w in words]
    for p in paths:
        if not p.exists():
            return fail(f"path '{p}' does not exist\nTry 'kbq validate --help'.")
    roots = _rule_roots(paths) if paths else [rules_dir()]
    failed = 0
    for root in roots:
        try:
            kn = build(root)
        except RuleErrors as errs:
            failed += len(errs.errors)
            for e in errs.errors:
                sys.stderr.write(e.render() + "\n")
            continue
        except KbError as exc:  # a RuleError of a single file
            failed += 1
            sys.stderr.write(f"{exc}\n")
            continue
        sys.stdout.write(f"{root}: ok — {len(kn.gpus)} GPUs, {len(kn.models)} models, "
                         f"{len(kn.precisions)} precisions, {len(kn.formulas)} formulas, "
                         f"{len(kn.flows)} flows, {len(kn.sources)} sources, {len(kn.claims)} claims\n")
    if failed:
        sys.stderr.write(f"{failed} error(s)\n")
        return 2
    return 0


def _rule_roots(paths: list[Path]) -> list[Path]:
    """A rules directory, or files inside one (the directory holding them is checked)."""
    roots: list[Path] = []
    for p in paths:
        root = p if p.is_dir() else (p.parent.parent if p.parent.name == "flows" else p.parent)
        if root not in roots:
            roots.append(root)
    return roots


validate = command(Command("validate", "Check rule files: schema, expressions, names, units, flows, sources.",
                           (), _validate, args="[PATH]..."))
