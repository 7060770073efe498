"""A command opens its home once: the runs it executes in-process use the command's platform, not one each."""

import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.defs.resources import AtlasmartResource
from atlasmart_dagster.store.platform import Platform


@pytest.fixture
def opened(monkeypatch) -> list[Platform]:
    """Every platform opened from now on, in order (Platform.open still does the opening)."""
    platforms: list[Platform] = []
    open_platform = Platform.open.__func__

    def counting(cls, *args, **kwargs):
        platforms.append(open_platform(cls, *args, **kwargs))
        return platforms[-1]

    monkeypatch.setattr(Platform, "open", classmethod(counting))
    return platforms


def test_demo_opens_the_platform_once_for_the_command_and_all_its_runs(env, opened, capsys):
    # demo runs the reference load and one chain per landed day (five), each a Dagster run in this process
    code = main(["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance", "demo"])
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.count("CERTIFIED") == 5
    assert len(opened) == 1


def test_the_loan_ends_with_the_command(env, opened, capsys):
    command = ["--home", str(env.home), "--landing", str(env.landing), "--ephemeral-instance"]
    assert main([*command, "blast-radius", "--asset", "fact_sales"]) == 0  # it builds the definitions
    (command_platform,) = opened
    # a run started after the command (another command in this process) checks the home's stores anew
    later = AtlasmartResource(home=str(env.home), landing=str(env.landing), clock="system").platform
    assert len(opened) == 2 and later is opened[1] is not command_platform


def test_a_resource_naming_anything_else_opens_its_own(env, tmp_path, opened):
    lent = AtlasmartResource.lending(env.platform)
    try:
        assert AtlasmartResource(**lent.model_dump()).platform is env.platform
        assert opened == []
        others = [
            AtlasmartResource(**{**lent.model_dump(), "home": str(tmp_path / "other")}),
            AtlasmartResource(**{**lent.model_dump(), "chunk_rows": 3}),
            AtlasmartResource(**{**lent.model_dump(), "embedded": True}),  # a drill's rehearsal home
        ]
        assert all(other.platform is not env.platform for other in others)
        assert len(opened) == 3
    finally:
        lent.end_loan()
