"""The documentation is executed: every shell and Python example in docs/**/*.md and README.md runs here.

* A fenced block with info string ``console`` holds commands ``$ numasim ARGS`` (a trailing ``\\`` continues a
  command on the next line), each followed by its expected output. The command runs through
  :func:`numasim.cli.main` in a temporary working directory holding a copy of ``docs/examples/``; its stdout
  (then stderr) must match the expected text, where ``...`` elides any text (a line of its own: any lines),
  as doctest's ELLIPSIS does. Trailing blanks are ignored. An expected line ``numasim: error: ...`` means the
  command must fail with status 2, a last line ``[exit status N]`` that it must exit with N; otherwise it must
  succeed.
* A fenced block with info string ``python`` in ``>>>`` style runs as a doctest (ELLIPSIS on). The blocks of
  one page share their globals and working directory, in page order, like one doctest file.

One test per page, so a page's examples can build on each other (a file written by one command is read by the
next). A failure names the page and the line of the example.
"""

from __future__ import annotations

import doctest
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

import numasim
import numasim.cli as cli

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLES = DOCS / "examples"
PAGES = sorted(p for p in DOCS.rglob("*.md") if EXAMPLES not in p.parents) + [ROOT / "README.md"]
_FENCE = re.compile(r"^```([A-Za-z0-9_+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_CHECKER = doctest.OutputChecker()
_STATUS = re.compile(r"^\[exit status (\d+)\]$")


@dataclass(frozen=True)
class Block:
    kind: str
    text: str
    line: int


@dataclass(frozen=True)
class Command:
    argv: list[str]
    expected: str
    line: int


def blocks(page: Path) -> list[Block]:
    """The ``console`` and ``python`` fenced blocks of a Markdown page, with the line each body starts on."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        kind = match.group(1)
        if kind in ("console", "python"):
            found.append(Block(kind, match.group(2), text.count("\n", 0, match.start(2)) + 1))
    return found


def commands(block: Block) -> list[Command]:
    """Split a console block into ``$ numasim ...`` commands and their expected output."""
    found: list[Command] = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            raise AssertionError(f"line {block.line + i}: console output before any '$ ' command: {line!r}")
        start = i
        cmd = line[2:]
        while cmd.endswith("\\"):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        i += 1
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        argv = shlex.split(cmd)
        if not argv or argv[0] != "numasim":
            raise AssertionError(f"line {block.line + start}: only numasim commands are executed, got {cmd!r}")
        found.append(Command(argv[1:], "\n".join(out), block.line + start))
    return found


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()) + "\n"


def output_matches(expected: str, got: str) -> bool:
    """``expected`` (with ``...`` elisions) matches ``got``, ignoring trailing blanks and blank edges."""
    if not expected.strip():
        return True  # no expected output written: the command only has to succeed
    return _CHECKER.check_output(_normalise(expected), _normalise(got), doctest.ELLIPSIS)


def _expected_status(expected: str) -> tuple[str, int]:
    """Split an ``[exit status N]`` last line off the expected text; default 2 after an error line, else 0."""
    lines = expected.rstrip("\n").splitlines()
    match = _STATUS.match(lines[-1]) if lines else None
    if match:
        return "\n".join(lines[:-1]), int(match.group(1))
    return expected, 2 if any(line.startswith("numasim: error:") for line in lines) else 0


def _run_console(block: Block, page: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    failures = []
    for command in commands(block):
        capsys.readouterr()
        status = cli.main(command.argv)
        out, err = capsys.readouterr()
        got = out + err
        expected, want_status = _expected_status(command.expected)
        where = f"{page.relative_to(ROOT)}:{command.line}: $ numasim {shlex.join(command.argv)}"
        if status != want_status:
            failures.append(f"{where}\n  exit status {status}, expected {want_status}\n{got}")
        elif not output_matches(expected, got):
            failures.append(f"{where}\n--- expected\n{expected}\n--- got\n{got}")
    return failures


def _run_python(block: Block, page: Path, globs: dict[str, object]) -> list[str]:
    test = doctest.DocTestParser().get_doctest(block.text, globs, page.name, str(page), block.line - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    runner.run(test, out=report.append, clear_globs=False)
    globs.update(test.globs)  # DocTest works on a copy; later blocks of the page see these names
    return [f"{page.relative_to(ROOT)}:{block.line}:\n" + "".join(report)] if runner.failures else []


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples(
    page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if EXAMPLES.is_dir():
        shutil.copytree(EXAMPLES, tmp_path / "docs" / "examples")
    if (ROOT / "examples").is_dir():  # the sweep files
        shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("NUMASIM_STATE_DIR", str(tmp_path / "machines"))  # persistent machines stay in the test
    monkeypatch.delenv("NUMASIM_MACHINE", raising=False)
    globs: dict[str, object] = {}
    failures: list[str] = []
    for block in blocks(page):
        if block.kind == "console":
            failures += _run_console(block, page, capsys)
        else:
            failures += _run_python(block, page, globs)
    assert not failures, "\n\n".join(failures)


def test_reference_names_public_api() -> None:
    """Every public name of numasim and its subpackages appears in docs/reference.md."""
    import importlib

    reference = (DOCS / "reference.md").read_text(encoding="utf-8")
    missing = [f"numasim.{name}" for name in numasim.__all__ if f"`{name}" not in reference]
    for sub in ("topology", "kernel", "workload", "engine", "calibrate"):
        module = importlib.import_module(f"numasim.{sub}")
        missing += [f"numasim.{sub}.{n}" for n in getattr(module, "__all__", []) if f"`{n}" not in reference]
    assert not missing, f"docs/reference.md does not mention: {missing}"


def test_reference_names_every_command() -> None:
    """Every command and sub-command of the CLI appears in docs/reference.md as ``numasim ...``."""
    import typer.main

    reference = (DOCS / "reference.md").read_text(encoding="utf-8")
    group = typer.main.get_command(cli.app)
    names = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        names += [f"numasim {name} {sub}" for sub in subs] if subs else [f"numasim {name}"]
    missing = [n for n in names if n not in reference]
    assert not missing, f"docs/reference.md does not document: {missing}"


def test_every_command_has_an_executed_example() -> None:
    """Every CLI command except ``probe`` (it measures the host it runs on) is run by some page."""
    import typer.main

    group = typer.main.get_command(cli.app)
    wanted = set()
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        wanted |= {f"{name} {sub}" for sub in subs} if subs else {name}
    wanted.discard("probe")
    ran = set()
    for page in PAGES:
        for block in blocks(page):
            if block.kind == "console":
                for command in commands(block):
                    ran |= {" ".join(command.argv[:2]), command.argv[0]}
    missing = sorted(wanted - ran)
    assert not missing, f"no executed example in the docs for: {missing}"


def test_harness_elisions() -> None:
    assert output_matches("a\n...\nz", "a\nb\nc\nz\n")
    assert output_matches("x = ...", "x = 42")
    assert not output_matches("a\nz", "a\nb\nz")
    cmds = commands(Block("console", "$ numasim topo list \\\n  --help\nUsage...\n$ numasim topo list\n", 1))
    assert [c.argv for c in cmds] == [["topo", "list", "--help"], ["topo", "list"]]
    assert cmds[0].expected == "Usage..."
    assert _expected_status("Killed\n[exit status 137]") == ("Killed", 137)
    assert _expected_status("numasim: error: no such file: x")[1] == 2
