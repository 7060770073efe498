"""A home path holding ``?``, ``#`` or a control character is refused (exit 2) before anything is created: the
stores' URLs would read those characters as more than a path and write files beside the home."""

from __future__ import annotations

import pytest

from atlasmart_dagster_tests.cli.commands import run


@pytest.mark.parametrize("name,says", [
    ("why?x", "holds '?'"),
    ("no#1", "holds '#'"),
    ("two\nlines", "holds '\\n'"),
    ("bell\x07", "holds '\\x07'"),
], ids=["question mark", "hash", "newline", "control character"])
@pytest.mark.parametrize("given", ["--home", "ATLASMART_HOME"])
def test_a_home_path_the_stores_urls_would_misread_is_refused_and_nothing_is_created(
        capsys, tmp_path, monkeypatch, name, says, given):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = tmp_path / "homes" / name
    home.parent.mkdir()
    argv = ["--ephemeral-instance", "status"]
    if given == "--home":
        argv = ["--home", str(home), *argv]
    else:
        monkeypatch.setenv("ATLASMART_HOME", str(home))
    code, out, err = run(capsys, *argv)
    assert (code, out) == (2, "")
    (line,) = err.strip().splitlines()
    assert line.startswith("atlasmart: error: the home path ") and says in line
    assert "choose a path without ?, # or control characters" in line
    assert "\x07" not in line
    assert list(home.parent.iterdir()) == []  # neither the home nor a stray file or folder beside it


def test_a_home_path_with_a_space_and_a_percent_sign_works(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = tmp_path / "homes" / "my 100% home"
    home.parent.mkdir()
    code, _, err = run(capsys, "--home", str(home), "--ephemeral-instance", "status")
    assert code == 0, err
    assert [p.name for p in home.parent.iterdir()] == ["my 100% home"]
