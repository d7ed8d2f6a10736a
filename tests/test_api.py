"""The public Python API, and what importing it costs."""

from __future__ import annotations

import subprocess
import sys

import ctxcli


def test_every_public_name_imports() -> None:
    for name in ctxcli.__all__:
        assert getattr(ctxcli, name) is not None


def test_the_api_compresses_one_record() -> None:
    compressor = ctxcli.Compressor(ctxcli.resolve(stages="window", max_tokens=0))
    record = {"messages": [{"role": "user", "content": f"m{i}"} for i in range(30)]}
    result = compressor.conversation(record)
    assert [m.data["content"] for m in result.after.messages] == [f"m{i}" for i in range(20, 30)]
    assert not result.over_budget


def test_help_and_skills_list_load_neither_openai_nor_tiktoken() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from ctxcli.cli import cli\n"
        "CliRunner().invoke(cli, ['--help'])\n"
        "CliRunner().invoke(cli, ['skills', 'list', '--dir', 'skills'])\n"
        "print(sorted(m for m in ('openai', 'tiktoken', 'tqdm') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_skills_group_is_loaded_only_when_asked_for() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from ctxcli.cli import cli\n"
        "print('yaml' in sys.modules)\n"
        "listing = CliRunner().invoke(cli, ['--help']).output\n"
        "print('skills    List, show' in listing, 'yaml' in sys.modules)\n"
        "CliRunner().invoke(cli, ['skills', '--help'])\n"
        "print('yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # --help says the skills line itself (cli.SKILLS_HELP): YAML loads for skills alone
    assert out.stdout.split() == ["False", "True", "False", "True"]
