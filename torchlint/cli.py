"""The `torchlint` command: `check` (the default), `rule`, `server`, `shapes`."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from torchlint import __version__
from torchlint.config import Overrides
from torchlint.engine import INTERNAL_ERROR
from torchlint.errors import TorchlintError
from torchlint.output import FORMATS, OutputContext
from torchlint.output.text import format_statistics
from torchlint.registry import all_rules, rule_by_code_or_name
from torchlint.runner import RunOptions, RunResult, run, run_source
from torchlint.selection import validate

SUBCOMMANDS = ("check", "rule", "server", "shapes")
EXIT_OK, EXIT_FOUND, EXIT_ERROR = 0, 1, 2


def _codes(values: list[str] | None, flag: str) -> tuple[str, ...] | None:
    if values is None:
        return None
    items = [item for value in values for item in value.split(",") if item.strip()]
    return validate(items, flag)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint",
        description="A static analysis tool for PyTorch code.",
    )
    parser.add_argument("--version", action="version", version=f"torchlint {__version__}")
    commands = parser.add_subparsers(dest="command")

    check = commands.add_parser("check", help="lint files and folders (the default command)")
    check.add_argument("paths", nargs="*", type=Path, help="files or folders (default: .)")
    check.add_argument("--select", action="append", metavar="CODES", help="rules to enable")
    check.add_argument("--extend-select", action="append", metavar="CODES", help="add rules")
    check.add_argument("--ignore", action="append", metavar="CODES", help="rules to disable")
    check.add_argument(
        "--extend-exclude", action="append", metavar="PATTERN", help="more paths to skip"
    )
    check.add_argument(
        "--output-format",
        choices=sorted(FORMATS),
        default=os.environ.get("TORCHLINT_OUTPUT_FORMAT", "concise"),
    )
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument(
        "--unsafe-fixes", action="store_true", help="also apply fixes that may change behaviour"
    )
    check.add_argument(
        "--diff", action="store_true", help="print the fixes as a diff; write nothing"
    )
    check.add_argument("--statistics", action="store_true", help="count diagnostics per rule")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even with diagnostics")
    check.add_argument("--stdin-filename", metavar="NAME", help="lint standard input as NAME")
    check.add_argument("--jobs", "-j", type=int, metavar="N", help="worker processes")
    check.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    check.add_argument("--cache-dir", type=Path, help="cache folder (default .torchlint_cache)")
    check.add_argument("--show-files", action="store_true", help="list the files to check")
    check.add_argument(
        "--force-exclude",
        action="store_true",
        help="apply excludes to paths given explicitly too (for pre-commit)",
    )
    check.add_argument("--config", type=Path, help="use this pyproject.toml or torchlint.toml")
    shapes = check.add_mutually_exclusive_group()
    shapes.add_argument("--shapes", dest="shapes", action="store_const", const="on")
    shapes.add_argument("--no-shapes", dest="shapes", action="store_const", const="off")
    check.add_argument("--quiet", "-q", action="store_true", help="print diagnostics only")
    check.add_argument("--verbose", "-v", action="store_true", help="show internal tracebacks")

    rule = commands.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("code", nargs="?", help="a rule code (TL101) or name")
    rule.add_argument("--all", action="store_true", help="every rule")
    rule.add_argument("--output-format", choices=("text", "json"), default="text")

    commands.add_parser("server", help="run the language server on stdin/stdout")

    shapes_table = commands.add_parser(
        "shapes", help="show each model's layers with their input and output shapes"
    )
    shapes_table.add_argument(
        "targets", nargs="+", metavar="PATH[::Class]", help="files (or folders), or one model"
    )
    shapes_table.add_argument(
        "--depth", type=int, default=1, metavar="N", help="expand nested modules N levels deep"
    )
    shapes_table.add_argument("--output-format", choices=("text", "json"), default="text")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args_list if not a.startswith("-")), None)
    if first not in SUBCOMMANDS and not {"-h", "--help", "--version"} & set(args_list):
        args_list.insert(0, "check")
    if not args_list:
        args_list = ["check"]
    parser = build_parser()
    args = parser.parse_args(args_list)
    verbose = getattr(args, "verbose", False)
    try:
        if args.command == "rule":
            return _rule_command(args)
        if args.command == "server":
            from torchlint.server import main as server_main

            return server_main()
        if args.command == "shapes":
            return _shapes_command(args)
        return _check_command(args)
    except TorchlintError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if verbose:
            traceback.print_exc()
        print(
            f"error: internal error: {type(exc).__name__}: {exc} (run with --verbose for details)",
            file=sys.stderr,
        )
        return EXIT_ERROR


def _check_command(args: argparse.Namespace) -> int:
    overrides = Overrides(
        select=_codes(args.select, "--select"),
        extend_select=_codes(args.extend_select, "--extend-select") or (),
        ignore=_codes(args.ignore, "--ignore") or (),
        extend_exclude=tuple(args.extend_exclude or ()),
        shapes=args.shapes or _shapes_from_environment(),
        config_file=args.config,
    )
    options = RunOptions(
        jobs=args.jobs,
        use_cache=not args.no_cache,
        force_exclude=args.force_exclude,
        cache_dir=args.cache_dir,
        fix_mode="diff" if args.diff else "fix" if args.fix else None,
        unsafe_fixes=args.unsafe_fixes,
    )
    if args.jobs is not None and args.jobs < 1:
        raise TorchlintError("--jobs must be at least 1")
    sources: dict[str, str] = {}
    if args.stdin_filename is not None and (not args.paths or args.paths == [Path("-")]):
        data = sys.stdin.buffer.read()
        result = run_source(data, args.stdin_filename, overrides, options)
        sources[args.stdin_filename] = data.decode("utf-8", errors="replace")
    else:
        if args.show_files:
            from torchlint.discovery import discover
            from torchlint.runner import display_path

            found = discover(args.paths or [Path(".")], overrides, force_exclude=args.force_exclude)
            for path in found.files:
                print(display_path(path))
            return EXIT_OK
        result = run(args.paths or [Path(".")], overrides, options)
    return _report(result, args, sources)


def _shapes_from_environment() -> str | None:
    """`TORCHLINT_NO_SHAPES=1` turns shape checks off, over any repository configuration."""
    from torchlint.shapes import refused_by_environment

    return "off" if refused_by_environment() else None


def _report(result: RunResult, args: argparse.Namespace, sources: dict[str, str]) -> int:
    stdin_fix = args.fix and not args.diff and args.stdin_filename is not None
    if args.diff or stdin_fix:
        # The fixed text (or the diff) is the output; diagnostics go to standard error.
        sys.stdout.write("".join(result.fixed_text))
        out = sys.stderr
    else:
        out = sys.stdout
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not result.files and not args.stdin_filename:
        print("warning: no Python files or notebooks found under the given paths", file=sys.stderr)
    if args.verbose:
        print(
            f"torchlint: checked {len(result.files)} files, {result.cached} from the cache",
            file=sys.stderr,
        )
    diagnostics = result.diagnostics
    if args.statistics:
        out.write(format_statistics(diagnostics))
    elif args.diff:
        count = result.fixed
        out.write(f"Would fix {count} error{'s' if count != 1 else ''}.\n" if count else "")
    else:
        context = OutputContext(
            diagnostics, sources=sources, show_fixes=args.unsafe_fixes, fixed=result.fixed
        )
        text = FORMATS[args.output_format](context)
        if args.quiet and args.output_format in ("concise", "full"):
            text = "".join(line + "\n" for line in text.splitlines()[: len(diagnostics)])
        out.write(text)
    if args.diff and result.fixed:
        return EXIT_FOUND
    missing = any("no such file or directory" in w for w in result.warnings)
    if missing or any(d.code == INTERNAL_ERROR for d in diagnostics):
        return EXIT_ERROR
    if diagnostics and not args.exit_zero:
        return EXIT_FOUND
    return EXIT_OK


def _shapes_command(args: argparse.Namespace) -> int:
    from torchlint.shapes.insight import run_command

    if _shapes_from_environment() == "off":
        raise TorchlintError("shape checks are off here (TORCHLINT_NO_SHAPES is set)")

    return run_command(args.targets, depth=args.depth, output_format=args.output_format)


def _rule_command(args: argparse.Namespace) -> int:
    if args.all:
        docs = [rule.doc() for rule in all_rules().values()]
    elif args.code:
        rule = rule_by_code_or_name(args.code)
        if rule is None:
            raise TorchlintError(f"unknown rule {args.code!r}; see `torchlint rule --all`")
        docs = [rule.doc()]
    else:
        raise TorchlintError("give a rule code (torchlint rule TL101) or --all")
    if args.output_format == "json":
        payload = [d.to_dict() for d in docs]
        print(json.dumps(payload if args.all else payload[0], indent=2))
    else:
        print("\n".join(d.to_markdown() for d in docs), end="")
    return EXIT_OK
