#!/usr/bin/env python3
"""Dump the command-line arguments a training script's sources declare, read with ``ast`` at a pinned commit.

The framework images cannot be built or pulled here (nvcr.io, Docker Hub and GitHub are unreachable), so the
flags each adapter passes are checked against the sources instead: this reads every ``*.add_argument(...)``
call of the given files as they are at ``--commit`` of a local git mirror (``git show <commit>:<path>``),
and writes their option strings, ``action`` and ``nargs`` as JSON (tests/data/argparse/), with the repository,
commit and paths they came from. Nothing is imported or run, so the same command gives the same file.

    python scripts/dump-argparse.py --git-dir /work/.mirror/NVIDIA+DeepLearningExamples/repo \\
        --repo NVIDIA/DeepLearningExamples --commit <40 hex> \\
        --path PyTorch/Classification/ConvNets/main.py --out tests/data/argparse/ngc_pytorch-25.12.json

A repository too big to mirror (PaddlePaddle/Paddle) can be read file by file instead: ``--from-file LOCAL`` once
per ``--path`` (in the same order) gives the text of that path as stored at ``--commit`` (a 40-hex commit, recorded
as given, not checked by git), and the dump's ``read_via`` says so.

A parser that makes a flag of every key of a YAML config (MindSpore's model zoo: ``parser.add_argument("--" + item,
...)`` for each key whose value is neither a list nor a dict) is read with ``--yaml-keys FILE``: the keys of the
file's first document become the options (a bool's value taken as a literal, the others as one value), and that
loop's call leaves ``unresolved`` (``resolved_by_yaml`` names the file and the call).

A call whose option strings are not string literals (built in a loop, say) is listed under ``unresolved``
with its line, never guessed. ``allow_abbrev`` is False when a parser of the files sets it so.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path

# argparse actions that take no value on the command line
NO_VALUE_ACTIONS = {"store_true", "store_false", "store_const", "append_const", "count", "help", "version"}


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _name_of(node: ast.AST | None) -> str | None:
    """The source text of a ``type=``/``action=`` value that is not a literal (``int``, ``str2bool``)."""
    return None if node is None else ast.unparse(node)


def arguments_of(source: str, path: str) -> tuple[list[dict[str, object]], list[dict[str, object]], bool]:
    """(arguments, unresolved calls, allow_abbrev) of one file's source."""
    tree = ast.parse(source, filename=path)
    found: list[dict[str, object]] = []
    unresolved: list[dict[str, object]] = []
    allow_abbrev = True
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name == "ArgumentParser":
            for kw in node.keywords:
                if kw.arg == "allow_abbrev" and _literal(kw.value) is False:
                    allow_abbrev = False
        if name != "add_argument":
            continue
        strings = [_literal(a) for a in node.args]
        if not node.args or not all(isinstance(s, str) for s in strings):
            unresolved.append({"path": path, "line": node.lineno, "call": ast.unparse(node)[:200]})
            continue
        keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        action = _literal(keywords["action"]) if "action" in keywords else "store"
        if action is None:  # a class or a variable: keep its source text
            action = _name_of(keywords.get("action"))
        nargs = _literal(keywords["nargs"]) if "nargs" in keywords else None
        options = [s for s in strings if isinstance(s, str) and s.startswith("-")]
        found.append(
            {
                "options": options,
                "dest": _literal(keywords["dest"]) if "dest" in keywords else None,
                "positional": not options,
                "action": action,
                "nargs": nargs,
                "type": _name_of(keywords.get("type")),
                "takes_value": action not in NO_VALUE_ACTIONS and nargs != 0,
                "path": path,
                "line": node.lineno,
            }
        )
    return found, unresolved, allow_abbrev


def git_show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True, capture_output=True, text=True
    ).stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", help="a local git mirror of the repository (or --from-file)")
    parser.add_argument(
        "--from-file", action="append", default=[], help="the text of the --path of the same place, read elsewhere"
    )
    parser.add_argument("--read-via", default="", help="with --from-file: how the files were read (recorded)")
    parser.add_argument("--repo", required=True, help="owner/name, as recorded in the dump")
    parser.add_argument("--commit", required=True, help="the commit (40 hex digits)")
    parser.add_argument("--path", action="append", required=True, help="a file of the script's parser (repeat)")
    parser.add_argument("--script", help="the script the adapter runs, as recorded (default: the first --path)")
    parser.add_argument("--note", default="", help="a sentence recorded with the dump")
    parser.add_argument("--yaml-keys", help="a YAML config whose keys the parser makes flags of (a local file)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.from_file:
        if len(args.from_file) != len(args.path) or not args.read_via:
            parser.error("--from-file once per --path, with --read-via")
        if not all(c in "0123456789abcdef" for c in args.commit) or len(args.commit) != 40:
            parser.error("--from-file needs the full 40-hex --commit the files were read at")
        commit = args.commit
        texts = {path: Path(local).read_text() for path, local in zip(args.path, args.from_file, strict=True)}
    elif args.git_dir:
        commit = subprocess.run(
            ["git", "--git-dir", args.git_dir, "rev-parse", f"{args.commit}^{{commit}}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        texts = {path: git_show(args.git_dir, commit, path) for path in args.path}
    else:
        parser.error("--git-dir or --from-file")
    arguments: list[dict[str, object]] = []
    unresolved: list[dict[str, object]] = []
    abbrev = True
    for path in args.path:
        found, missed, allow = arguments_of(texts[path], path)
        arguments += found
        unresolved += missed
        abbrev = abbrev and allow
    resolved: list[dict[str, object]] = []
    if args.yaml_keys:
        import yaml  # only for --yaml-keys

        first = next(yaml.safe_load_all(Path(args.yaml_keys).read_text()))
        loops = [u for u in unresolved if "('--' + item" in str(u["call"])]
        if not loops:
            parser.error("--yaml-keys: no add_argument('--' + item, ...) call left unresolved")
        unresolved = [u for u in unresolved if u not in loops]
        for key, value in first.items():
            if isinstance(value, list | dict):
                continue
            arguments.append(
                {
                    "options": [f"--{key}"],
                    "dest": None,
                    "positional": False,
                    "action": "store",
                    "nargs": None,
                    "type": "ast.literal_eval" if isinstance(value, bool) else type(value).__name__,
                    "takes_value": True,
                    "path": args.yaml_keys,
                    "line": None,
                }
            )
        resolved = [{"yaml": args.yaml_keys, **u} for u in loops]
    dump = {
        "repo": args.repo,
        "commit": commit,
        "script": args.script or args.path[0],
        "paths": args.path,
        "note": args.note,
        "allow_abbrev": abbrev,
        "generated_by": "scripts/dump-argparse.py",
        **({"read_via": args.read_via} if args.from_file else {}),
        "arguments": arguments,
        "unresolved": unresolved,
        **({"resolved_by_yaml": resolved} if resolved else {}),
    }
    Path(args.out).write_text(json.dumps(dump, indent=1) + "\n")
    print(f"{args.out}: {len(arguments)} arguments, {len(unresolved)} unresolved, commit {commit}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
