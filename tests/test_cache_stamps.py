"""A warm run found by stamps says what a cold run says: after an edit, after an imported
file changed, after a new file changed where an import resolves; and it never imports the
rules or LibCST when the cache answers for every file."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.conftest import BUGGY, CLEAN, run_cli
from tests.test_project_index import MODELS, TRAIN
from torchlint.cache import ResultCache
from torchlint.semantic.resolve import dependency_digest

_HOUR_AGO = time.time() - 3600


def _settle(root: Path, when: float = _HOUR_AGO) -> None:
    """Date every file and folder under `root` back, as in a tree nobody is editing."""
    for folder, _, names in os.walk(root):
        for name in names:
            os.utime(Path(folder) / name, (when, when))
        os.utime(folder, (when, when))


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.torchlint]\n", encoding="utf-8")
    (root / "models.py").write_text(MODELS, encoding="utf-8")
    (root / "pkg" / "train.py").write_text(TRAIN, encoding="utf-8")
    (root / "buggy.py").write_text(BUGGY, encoding="utf-8")
    (root / "clean.py").write_text(CLEAN, encoding="utf-8")
    _settle(root)
    return root


def _check(root: Path, cache: Path | None) -> str:
    where = ["--cache-dir", str(cache)] if cache is not None else ["--no-cache"]
    result = run_cli(".", "--no-shapes", *where, cwd=root)
    assert "Traceback" not in result.stderr, result.stderr
    return result.stdout


def test_warm_runs_say_what_cold_runs_say_through_edits(tmp_path: Path) -> None:
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    cold = _check(root, None)
    assert "pkg/train.py:6:34: TL101" in cold and "buggy.py" in cold
    assert _check(root, cache) == cold  # fills the cache, with stamps
    assert _check(root, cache) == cold  # answered by stamps
    # An edit of a checked file.
    (root / "clean.py").write_text(BUGGY, encoding="utf-8")
    _settle(root, _HOUR_AGO + 60)
    edited = _check(root, None)
    assert "clean.py" in edited
    assert _check(root, cache) == edited
    assert _check(root, cache) == edited
    # An edit of a file another one imports.
    (root / "models.py").write_text(MODELS.replace("nn.Softmax(dim=1)", "nn.Identity()"))
    _settle(root, _HOUR_AGO + 120)
    fixed = _check(root, None)
    assert "pkg/train.py" not in fixed
    assert _check(root, cache) == fixed
    # A new file that the import now resolves to, next to the importer.
    (root / "models.py").write_text(MODELS, encoding="utf-8")
    _settle(root, _HOUR_AGO + 180)
    assert "pkg/train.py:6:34: TL101" in _check(root, cache)
    (root / "pkg" / "models.py").write_text(
        MODELS.replace("nn.Softmax(dim=1)", "nn.Identity()"), encoding="utf-8"
    )
    _settle(root, _HOUR_AGO + 240)
    shadowed = _check(root, None)
    assert "pkg/train.py" not in shadowed
    assert _check(root, cache) == shadowed


def test_stamps_name_the_imported_file_and_the_folders_that_decided(tmp_path: Path) -> None:
    root = _project(tmp_path)
    train = root / "pkg" / "train.py"
    stamps: dict[str, list[int]] = {}
    dependency_digest(train, train.read_bytes(), stamps)
    assert str(root / "models.py") in stamps
    assert {str(root / "pkg"), str(root)} <= stamps.keys()


def test_known_key_holds_while_the_stamps_do(tmp_path: Path) -> None:
    root = _project(tmp_path)
    train = root / "pkg" / "train.py"
    stamps: dict[str, list[int]] = {}
    dependency_digest(train, train.read_bytes(), stamps)
    cache = ResultCache(tmp_path / "cache")
    cache.put("pkg/train.py", "k1", [], stamps=stamps, settings="s")
    cache.save()
    assert ResultCache(tmp_path / "cache").known_key("pkg/train.py", "s") == "k1"
    assert ResultCache(tmp_path / "cache").known_key("pkg/train.py", "other") is None
    (root / "pkg" / "helpers.py").write_text("", encoding="utf-8")  # the folder changed
    assert ResultCache(tmp_path / "cache").known_key("pkg/train.py", "s") is None


def test_recent_stamps_are_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(CLEAN, encoding="utf-8")  # written just now: its clock may be coarse
    info = path.stat()
    cache = ResultCache(tmp_path / "cache")
    cache.put("m.py", "k1", [], stamps={str(path): [info.st_mtime_ns, info.st_size]})
    assert cache.known_key("m.py", "") is None


def test_a_fully_warm_run_imports_neither_rules_nor_libcst(tmp_path: Path) -> None:
    root = _project(tmp_path)
    cache = tmp_path / "cache"
    _check(root, cache)
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('loaded:', sorted(m for m in sys.modules"
        " if m == 'libcst' or m.startswith('torchlint.rules.'))))\n"
    )
    result = run_cli(".", "--no-shapes", "--cache-dir", str(cache), cwd=root, prelude=probe)
    assert "loaded: []" in result.stdout, result.stdout + result.stderr


def test_rule_codes_read_from_the_rule_files_match_the_rules() -> None:
    from torchlint.registry import all_rules
    from torchlint.rule_codes import _scan, rule_codes

    expected = {code: rule.default_enabled for code, rule in all_rules().items()}
    assert _scan() == expected  # else every run imports the rules to choose its codes
    assert rule_codes() == expected


def test_rule_labels_read_from_the_rule_files_match_the_rules() -> None:
    from torchlint.registry import all_rules
    from torchlint.rule_codes import _labels

    expected = {code: (rule.name, rule.severity) for code, rule in all_rules().items()}
    assert _labels() == expected  # else a shape check's report imports the rules


def test_cached_results_belong_to_the_code_that_made_them(tmp_path: Path) -> None:
    """A rule or engine module edited in place (an editable install, a patched rule) makes
    every cached result stale, though torchlint's version number is the same."""
    import torchlint.cache as cache_module

    cache = ResultCache(tmp_path / "cache")
    cache.put("a.py", "key", [])
    cache.save()
    assert ResultCache(tmp_path / "cache")._entries
    before = cache_module.engine_version()
    cache_module.engine_version.cache_clear()
    rule = Path(cache_module.__file__).parent / "cache.py"
    stat = rule.stat()
    try:
        os.utime(rule, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert cache_module.engine_version() != before
        assert not ResultCache(tmp_path / "cache")._entries
    finally:
        os.utime(rule, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        cache_module.engine_version.cache_clear()
    assert cache_module.engine_version() == before


def test_linting_without_fixes_never_imports_libcst_matchers(tmp_path: Path) -> None:
    """`libcst.matchers` costs most of a second to import: only fix builders may load it,
    so a run without findings to fix never pays for it."""
    import subprocess
    import sys

    (tmp_path / "clean.py").write_text(CLEAN, encoding="utf-8")
    probe = (
        "import sys\n"
        "from torchlint.cli import main\n"
        "try:\n"
        "    main(['check', '--no-shapes', '--no-cache', '--exit-zero', '--select', 'ALL', "
        "'clean.py'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('matchers' if 'libcst.matchers' in sys.modules else 'clean')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.stdout.strip().splitlines()[-1] == "clean", result.stdout + result.stderr
