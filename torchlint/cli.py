"""The `torchlint` command: `check` (the default), `rule`, `server`, `shapes`, `version`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TextIO

from torchlint import __version__
from torchlint.config import Overrides
from torchlint.diagnostic import INTERNAL_ERROR
from torchlint.errors import TorchlintError
from torchlint.output import FORMATS, OutputContext
from torchlint.output.color import COLOR_CHOICES, use_color
from torchlint.output.text import format_fixes, format_statistics
from torchlint.registry import all_rules, rule_by_code_or_name
from torchlint.runner import RunOptions, RunResult, run, run_source
from torchlint.selection import validate

SUBCOMMANDS = ("check", "rule", "server", "shapes", "version")
_MISSING = "no such file or directory"
_TORCH_VERSION = re.compile(r"\d+\.\d+(\.\d+)?")
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
    check.add_argument(
        "--config",
        action="append",
        metavar="FILE | KEY=VALUE",
        help="use this pyproject.toml or torchlint.toml; or override one setting"
        " (TOML: --config 'ignore = [\"TL302\"]'); repeatable",
    )
    check.add_argument(
        "--output-file", "-o", type=Path, metavar="FILE", help="write the report to FILE"
    )
    check.add_argument(
        "--add-noqa",
        action="store_true",
        help="add a `# noqa: CODE` comment to every line with a diagnostic",
    )
    check.add_argument(
        "--show-settings", action="store_true", help="print the settings for the first path"
    )
    check.add_argument(
        "--show-fixes", action="store_true", help="list what the fixes resolved (or would)"
    )
    check.add_argument(
        "--exit-non-zero-on-fix",
        action="store_true",
        help="exit 1 when a fix was applied, even if nothing is left",
    )
    check.add_argument(
        "--fix-only", action="store_true", help="apply fixes and report only what was fixed"
    )
    check.add_argument(
        "--color",
        choices=COLOR_CHOICES,
        default="auto",
        help="colour the report: auto (on a terminal; NO_COLOR, FORCE_COLOR), always, never",
    )
    check.add_argument("--watch", action="store_true", help="check again whenever a file changes")
    check.add_argument(
        "--torch-version",
        metavar="X.Y",
        help="the torch version the code targets (overrides the `torch-version` setting)",
    )
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

    commands.add_parser("version", help="print torchlint's version (and torch's)")
    return parser


def _unknown_command(args: list[str]) -> str | None:
    """A first word that is neither a command nor an existing path, and does not look like one."""
    word = args[0] if args else None
    if word is None or word.startswith("-") or word in SUBCOMMANDS or os.path.lexists(word):
        return None
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", word):
        return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    unknown = _unknown_command(args_list)
    if unknown is not None:
        print(
            f"error: unknown command {unknown!r}, and there is no file or folder of that name"
            f" (commands: {', '.join(SUBCOMMANDS)}; see torchlint --help)",
            file=sys.stderr,
        )
        return EXIT_ERROR
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
        if args.command == "version":
            return _version_command()
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


def _config_options(values: list[str] | None) -> tuple[Path | None, tuple[str, ...]]:
    """`--config` values: at most one file, and any number of KEY=VALUE settings."""
    files = [v for v in values or () if "=" not in v or os.path.isfile(v)]
    if len(files) > 1:
        raise TorchlintError("--config names more than one file; give one FILE")
    settings = tuple(v for v in values or () if v not in files)
    return (Path(files[0]) if files else None), settings


def _check_command(args: argparse.Namespace) -> int:
    if args.torch_version is not None and not _TORCH_VERSION.fullmatch(args.torch_version):
        raise TorchlintError(f"--torch-version {args.torch_version!r}: give X.Y, such as 2.4")
    config_file, settings = _config_options(args.config)
    overrides = Overrides(
        select=_codes(args.select, "--select"),
        extend_select=_codes(args.extend_select, "--extend-select") or (),
        ignore=_codes(args.ignore, "--ignore") or (),
        extend_exclude=tuple(args.extend_exclude or ()),
        shapes=args.shapes or _shapes_from_environment(),
        config_file=config_file,
        settings=settings,
        torch_version=args.torch_version,
    )
    if args.fix_only:
        args.fix = True
    if args.jobs is not None and args.jobs < 1:
        raise TorchlintError("--jobs must be at least 1")
    stdin = args.stdin_filename is not None and (not args.paths or args.paths == [Path("-")])
    if args.watch:
        if stdin:
            raise TorchlintError("--watch checks files on disk; it cannot watch standard input")
        from torchlint.watch import watch

        return watch(args.paths or [Path(".")], lambda: _check_once(args, overrides, stdin))
    return _check_once(args, overrides, stdin)


def _check_once(args: argparse.Namespace, overrides: Overrides, stdin: bool) -> int:
    if args.show_settings:
        from torchlint.show_settings import format_settings

        target = Path(args.stdin_filename) if stdin else (args.paths or [Path(".")])[0]
        with _output(args.output_file) as stdout:
            stdout.write(format_settings(target, overrides))
        return EXIT_OK
    sources: dict[str, str] = {}
    with _progress(args, stdin) as progress:
        options = RunOptions(
            jobs=args.jobs,
            use_cache=not args.no_cache,
            force_exclude=args.force_exclude,
            cache_dir=args.cache_dir,
            fix_mode="diff" if args.diff else "fix" if args.fix else None,
            unsafe_fixes=args.unsafe_fixes,
            progress=progress,
        )
        if stdin:
            data = sys.stdin.buffer.read()
            result = run_source(data, args.stdin_filename, overrides, options)
            sources[args.stdin_filename] = data.decode("utf-8", errors="replace")
        else:
            if args.show_files:
                from torchlint.discovery import discover
                from torchlint.runner import display_path

                paths = args.paths or [Path(".")]
                found = discover(paths, overrides, force_exclude=args.force_exclude)
                with _output(args.output_file) as stdout:
                    for path in found.files:
                        stdout.write(display_path(path) + "\n")
                return EXIT_OK
            result = run(args.paths or [Path(".")], overrides, options)
    with _output(args.output_file) as stdout:
        return _report(result, args, sources, stdout)


def _shapes_from_environment() -> str | None:
    """`TORCHLINT_NO_SHAPES=1` turns shape checks off, over any repository configuration."""
    from torchlint.shapes import refused_by_environment

    return "off" if refused_by_environment() else None


@contextlib.contextmanager
def _output(path: Path | None) -> Iterator[TextIO]:
    """Standard output, or the `--output-file` (its folder made if need be)."""
    if path is None:
        yield sys.stdout
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        yield handle


@contextlib.contextmanager
def _progress(
    args: argparse.Namespace, stdin: bool
) -> Iterator[Callable[[str, int, int], None] | None]:
    """The live progress line's update function on a terminal, else None."""
    if args.quiet or stdin or not sys.stderr.isatty():
        yield None
        return
    from torchlint.progress import ProgressLine

    line = ProgressLine(sys.stderr)
    try:
        yield line.update
    finally:
        line.close()


def _report(
    result: RunResult, args: argparse.Namespace, sources: dict[str, str], stdout: TextIO
) -> int:
    stdin_fix = args.fix and not args.diff and args.stdin_filename is not None
    if args.diff or stdin_fix:
        # The fixed text (or the diff) is the output; diagnostics go to standard error.
        stdout.write("".join(result.fixed_text))
        out: TextIO = sys.stderr
    else:
        out = stdout
    missing = [w for w in result.warnings if w.endswith(_MISSING)]
    for warning in result.warnings:
        kind = "error" if warning in missing else "warning"
        print(f"{kind}: {warning}", file=sys.stderr)
    if not result.files and not args.stdin_filename and not missing:
        print("warning: no Python files or notebooks found under the given paths", file=sys.stderr)
        result.not_run.append("every check (no Python file or notebook was found)")
    if args.verbose:
        print(
            f"torchlint: checked {len(result.files)} files, {result.cached} from the cache",
            file=sys.stderr,
        )
    diagnostics = result.diagnostics
    color = use_color(args.color, out)
    if args.add_noqa:
        from torchlint.add_noqa import add_noqa

        added, warnings = add_noqa(diagnostics)
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        out.write(f"Added {added} noqa comment{'s' if added != 1 else ''}.\n")
        return EXIT_ERROR if missing else EXIT_OK
    if args.show_fixes and args.output_format in ("concise", "full"):
        if args.fix or args.diff:
            heading = "Would fix" if args.diff else "Fixed"
            out.write(format_fixes(result.fixed_codes, heading))
        else:
            fixable = Counter(
                (d.path, d.code, d.name)
                for d in diagnostics
                if d.fix is not None and (d.fix.safe or args.unsafe_fixes)
            )
            out.write(format_fixes(fixable, "`--fix` would fix"))
    if args.statistics:
        out.write(format_statistics(diagnostics))
    elif args.diff:
        count = result.fixed
        out.write(f"Would fix {count} problem{'s' if count != 1 else ''}.\n" if count else "")
    elif args.fix_only:
        if args.output_format in ("concise", "full") and not args.quiet:
            count = result.fixed
            out.write(f"Fixed {count} problem{'s' if count != 1 else ''}.\n" if count else "")
    else:
        context = OutputContext(
            diagnostics,
            sources=sources,
            show_fixes=args.unsafe_fixes,
            fixed=result.fixed,
            unchecked=len(missing),
            not_run=tuple(result.not_run),
            color=color,
        )
        text = FORMATS[args.output_format](context)
        if args.quiet and args.output_format in ("concise", "full"):
            text = "".join(line + "\n" for line in text.splitlines()[: len(diagnostics)])
        out.write(text)
    if missing or any(d.code == INTERNAL_ERROR for d in diagnostics):
        return EXIT_ERROR
    if result.fixed and args.exit_non_zero_on_fix:
        return EXIT_FOUND
    if args.diff and result.fixed:
        return EXIT_FOUND
    if diagnostics and not args.exit_zero and not args.fix_only:
        return EXIT_FOUND
    return EXIT_OK


def _version_command() -> int:
    import importlib.metadata

    print(f"torchlint {__version__}")
    try:
        torch = f"torch {importlib.metadata.version('torch')} (shape checks available)"
    except importlib.metadata.PackageNotFoundError:
        torch = "torch not installed (shape checks unavailable)"
    print(f"{torch}, Python {sys.version.split()[0]}")
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
