"""Every fenced `bash` block in README.md and docs/*.md runs as pasted, or this test fails.

How a page is run, and how a doc author marks placeholders and blocks that must not run, is
described in docs/development.md ("Commands in the docs are tested"). In short: one shell per
block, in a fresh folder per page holding a copy of one demo's evidence store, against one
lasting Prefect server started for this module with `assay server start` (its own
`PREFECT_HOME`); `RUN_ID`, `sk-…` and port 8765 are substituted; a command may exit 1 only when
its line shows its status (`; echo "exit $?"`); a block preceded by
`<!-- docs-test: skip — REASON -->` is not run. Output is never checked: only exit codes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.github_server import TOKEN as GITHUB_TOKEN
from tests.github_server import running_fake_github
from tests.judge_server import JudgeServer
from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(
    r"^(?:<!-- docs-test: (?P<directive>[^\n]*?) -->\n)?```(?P<lang>[\w-]*)[^\n]*\n"
    r"(?P<body>.*?)^```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
"""`console` is a transcript: its `$ ` lines are the commands, the rest is their output."""
SKIP = re.compile(r"skip — \S.*")
"""A skip directive must give its reason: `<!-- docs-test: skip — starts a worker -->`."""
SHOWN_STATUS = 'echo "exit $?"'
"""A command whose line shows its exit status may exit 1 (a negative verdict), never 2 or more."""
BLOCK_TIMEOUT_SECONDS = 240
SERVICE_PORT = "8765"
EXAMPLE_KEY = "sk-…"
GITHUB_PULL_REQUESTS = (("acme/support-bot", 7),)
TRAP = (
    '__docs_err() { echo "$1 $2" >> "$DOCS_TEST_ERRORS"; }; '
    'trap \'__docs_err "$LINENO" "$?"\' ERR\n'
)
"""The first line of every block's script: each failing command's line and exit status."""
CLEANUP = "\ntrap - ERR\njobs -p | xargs -r kill 2>/dev/null; wait 2>/dev/null; true\n"
"""The last lines: background jobs a block started (`assay serve &`) end with it."""


@dataclass(frozen=True)
class Block:
    """One fenced shell block of a page."""

    page: Path
    line: int
    language: str
    body: str
    directive: str | None

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def shell_blocks(page: Path) -> list[Block]:
    """The page's fenced shell blocks, in order, with the directive line above each."""
    text = page.read_text(encoding="utf-8")
    return [
        Block(
            page,
            text.count("\n", 0, found.start("body")) + 1,
            found["lang"],
            _commands(found["lang"], found["body"]),
            found["directive"],
        )
        for found in BLOCK.finditer(text)
        if found["lang"] in SHELL_LANGUAGES
    ]


def _commands(language: str, body: str) -> str:
    """A block's commands; a transcript's output lines become empty lines (so that line
    numbers still match the page)."""
    if language != "console":
        return body
    return "".join(
        line[2:] if line.startswith("$ ") else "\n" for line in body.splitlines(keepends=True)
    )


def logical_command(lines: list[str], index: int) -> str:
    """The command that line `index` belongs to, with its backslash continuations."""
    start = index
    while start > 0 and lines[start - 1].rstrip().endswith("\\"):
        start -= 1
    end = index
    while end < len(lines) - 1 and lines[end].rstrip().endswith("\\"):
        end += 1
    return "\n".join(lines[start : end + 1])


def failures(block: Block, errors: str) -> list[str]:
    """What went wrong, from the ERR trap's `LINE STATUS` records: a status other than 0,
    except 1 on a command that shows its status."""
    lines = block.body.splitlines()
    found = []
    for record in errors.splitlines():
        line_text, status_text = record.split()
        index, status = int(line_text) - 2, int(status_text)  # the trap is the script's line 1
        command = logical_command(lines, index) if 0 <= index < len(lines) else "?"
        if status == 1 and SHOWN_STATUS in command:
            continue
        found.append(f"{block.page.name}:{block.line + index} exit {status}: {command.strip()}")
    return found


@dataclass
class World:
    """What every page shares: the environment, the demo's store, the substitutions."""

    env: dict[str, str]
    demo_store: Path
    run_id: str
    server_port: int
    pages: Path

    def substituted(self, body: str, service_port: int) -> str:
        body = re.sub(r"\bRUN_ID\b", self.run_id, body)
        return body.replace(EXAMPLE_KEY, "sk-test").replace(SERVICE_PORT, str(service_port))


def _assay(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "assay"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT_SECONDS,
        check=False,
    )


def _ensure_server(world: World) -> None:
    """The module's lasting Prefect server, started again when a page stopped it."""
    if _assay(world.env, world.pages, "server", "status").returncode == 0:
        return
    started = _assay(world.env, world.pages, "server", "start", "--port", str(world.server_port))
    assert started.returncode == 0, started.stdout + started.stderr


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, judge_server_session: JudgeServer
) -> Iterator[World]:
    """One lasting Prefect server and one demo (the gate of its v2 outputs against its v1 run
    gives `RUN_ID`), a local judge, and a fake GitHub API."""
    base = tmp_path_factory.mktemp("docs-commands")
    with running_fake_github(*GITHUB_PULL_REQUESTS) as github:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("PREFECT_", "ASSAY_", "OPENAI_", "GITHUB_", "AWS_"))
        }
        env.update(
            PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
            PREFECT_HOME=str(base / "prefect-home"),
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
            OPENAI_BASE_URL=judge_server_session.base_url,
            GITHUB_API_URL=github.url,
            GITHUB_TOKEN=GITHUB_TOKEN,
            COLUMNS="100",
        )
        demo = base / "demo"
        demo.mkdir()
        _link_repository(demo)
        world = World(env, demo / ".assay", "", free_port(), base / "pages")
        world.pages.mkdir()
        _ensure_server(world)
        # README's first command, as CI has it: .venv is there, the server is up (so both
        # `make setup` and `assay server start` are no-ops); the demo's store is kept apart.
        ran = subprocess.run(
            ["make", "-C", str(ROOT), "demo"],
            env={**env, "ASSAY_STORE": f"file://{demo / '.assay'}"},
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_SECONDS,
            check=False,
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr
        runs = json.loads(_assay(env, demo, "runs", "list", "--json").stdout)
        v1 = next(r["run_id"] for r in runs if r["variant"] == "v1")
        gated = _assay(
            env,
            demo,
            *("gate", "support-bot", "--outputs", "examples/outputs/support-bot-v2.jsonl"),
            *("--subject", "agent:support-bot@v2", "--baseline", v1, "--json"),
        )
        assert gated.returncode == 1, gated.stdout + gated.stderr
        world.run_id = json.loads(gated.stdout)["run_id"]
        try:
            yield world
        finally:
            _assay(env, base, "server", "stop")


def _link_repository(folder: Path) -> None:
    """What the docs' commands read from a clone: the examples, the .venv, the deployments."""
    for name in ("examples", ".venv", "deployments"):
        (folder / name).symlink_to(ROOT / name)


def test_make_demo_leaves_the_nightly_deployment_paused(world: World) -> None:
    status = json.loads(_assay(world.env, world.pages, "server", "status", "--json").stdout)
    filtered = httpx.post(
        f"{status['api_url']}/deployments/filter",
        json={"deployments": {"name": {"any_": ["nightly"]}}},
        timeout=30,
    )
    (deployment,) = filtered.json()
    assert deployment["paused"] is True
    assert deployment["entrypoint"] == "flows/nightly.py:nightly"
    assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 2 * * *"]


def _page_folder(world: World, page: Path, suffix: str = "") -> Path:
    """A fresh folder for the page: the repository's examples and .venv, the demo's store."""
    folder = world.pages / f"{page.stem}{suffix}"
    folder.mkdir()
    _link_repository(folder)
    shutil.copytree(world.demo_store, folder / ".assay")
    return folder


def run_block(
    world: World, block: Block, folder: Path, extra_env: dict[str, str] | None = None
) -> list[str]:
    """Run one block in `folder`; what went wrong (empty when every command did its job)."""
    errors = folder / f".errors-{block.line}"
    errors.write_text("")
    script = TRAP + world.substituted(block.body, free_port()) + CLEANUP
    started = time.monotonic()
    try:
        done = subprocess.run(
            ["bash", "-c", script],
            env={**world.env, **(extra_env or {}), "DOCS_TEST_ERRORS": str(errors)},
            cwd=folder,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=BLOCK_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return [f"{block.where}: still running after {BLOCK_TIMEOUT_SECONDS} s"]
    found = failures(block, errors.read_text())
    print(f"{block.where}: {time.monotonic() - started:.1f} s")
    if found:
        tail = (done.stdout + done.stderr)[-3000:]
        found.append(f"(block ran {time.monotonic() - started:.1f} s; output tail)\n{tail}")
    return found


def _runnable(page: Path) -> list[Block]:
    return [block for block in shell_blocks(page) if block.directive is None]


@pytest.mark.usefixtures("judge_server_session")
def test_every_shell_block_is_run_or_says_why_not() -> None:
    """Fences are `bash` (a reader's shell), and a block that is not run gives its reason."""
    problems = []
    for page in PAGES:
        for block in shell_blocks(page):
            if block.language not in ("bash", "console"):
                problems.append(f"{block.where}: a ```{block.language} block; use ```bash")
            if block.directive is not None and not SKIP.fullmatch(block.directive):
                problems.append(f"{block.where}: directive {block.directive!r} is not skip — …")
    assert not problems, "\n".join(problems)
    runnable = [page.name for page in PAGES if _runnable(page)]
    assert "README.md" in runnable and "api.md" in runnable and "commands.md" in runnable


def _stops_the_server(page: Path) -> bool:
    return any("assay server stop" in block.body for block in _runnable(page))


@pytest.mark.parametrize(
    "page",
    # Pages that stop the server go last: each later page pays for starting it again.
    sorted((p for p in PAGES if _runnable(p)), key=_stops_the_server),
    ids=lambda p: p.name,
)
def test_the_page_commands_work_as_pasted(world: World, page: Path) -> None:
    _ensure_server(world)  # a page before may have stopped it
    folder = _page_folder(world, page)
    problems = []
    for block in _runnable(page):
        problems += run_block(world, block, folder)
    assert not problems, "\n".join(problems)


IN_PROCESS_PAGES = (
    ROOT / "README.md",
    ROOT / "docs" / "quickstart.md",
    ROOT / "docs" / "commands.md",
)
"""The pages a new user pastes first, run again with `ASSAY_LOCAL=1`: every command in the
process (no local Assay service), against the same lasting Prefect server."""


@pytest.mark.parametrize("page", IN_PROCESS_PAGES, ids=lambda p: p.name)
def test_the_first_pages_work_in_process_too(world: World, page: Path) -> None:
    _ensure_server(world)
    folder = _page_folder(world, page, "-in-process")
    problems = []
    for block in _runnable(page):
        problems += run_block(world, block, folder, {"ASSAY_LOCAL": "1"})
    assert not problems, "\n".join(problems)


def test_a_failing_command_fails_the_runner(world: World, tmp_path: Path) -> None:
    """The runner sees a failing command (exit 2 or 127), and a negative verdict only where its
    line shows the status."""
    page = tmp_path / "planted.md"
    page.write_text(
        "```bash\n"
        "assay runs show RUN_ID --json\n"
        "assay runs show no-such-run\n"
        'assay gate --check RUN_ID; echo "exit $?"\n'
        "assay gate --check RUN_ID\n"
        "assay-typo --help\n"
        "```\n"
    )
    (block,) = shell_blocks(page)
    folder = _page_folder(world, page)
    found = run_block(world, block, folder)
    assert [line.split(": ", 1)[0] for line in found[:-1]] == [
        "planted.md:3 exit 2",
        "planted.md:5 exit 1",
        "planted.md:6 exit 127",
    ]
