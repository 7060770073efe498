"""The gateway's limits hold for every query shape, in a process of the query's own; bad settings are usage errors."""

import os
import resource
import signal
import subprocess
import sys
import time

import duckdb
import pytest

from atlasmart_dagster.cli.main import main
from atlasmart_dagster.product.access.access_log import access_log
from atlasmart_dagster.product.access.engine_process import EngineFailed, run_in_child
from atlasmart_dagster.product.access.gateway import Gateway, QueryError, QueryLimits
from atlasmart_dagster.ops.runs.chains import run_chain, run_reference
from atlasmart_dagster_tests.environment import SAMPLE_DAYS, Env

CAP = "256MB"
CAP_BYTES = 256 * 10**6
TEN_TIMES, TENTH = 10 * CAP_BYTES, CAP_BYTES // 10


def _strings_crossed(size: int) -> str:
    """A CROSS JOIN whose 2 MB strings add up to ``size`` bytes in one vector."""
    side = int((size / 2_000_000) ** 0.5) + 1
    return (f"SELECT length(a.s || b.s) AS n FROM (SELECT repeat('x', 1000000) AS s FROM range({side})) a "
            f"CROSS JOIN (SELECT repeat('y', 1000000) AS s FROM range({side})) b")


def _lists(size: int) -> str:
    """Four lists of BIGINT built in one row, ``size`` bytes together."""
    return f"SELECT len(list_value({', '.join([f'range({size // 32})'] * 4)})) AS n"


# Each shape at a tenth of the cap (it runs) and at ten times the cap (it is refused). Before
# the query had a process of its own, DuckDB's memory_limit let each of the large ones through:
# the values grew to 3 GB and more under a 256 MB limit (14.8 GB for generate_series).
SHAPES = {
    "repeat": (lambda size: f"SELECT length(repeat('x', {size})) AS n",
               lambda result: result.to_pylist() == [{"n": TENTH}]),
    "generate_series": (lambda size: f"SELECT generate_series(1, {size // 8}) AS s",
                        lambda result: len(result.column("s")[0]) == TENTH // 8),
    "cross_join": (_strings_crossed, lambda result: set(result.column("n").to_pylist()) == {2_000_000}),
    "list_value": (_lists, lambda result: result.to_pylist() == [{"n": 4}]),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    env = Env(tmp_path_factory.mktemp("limits"))
    assert run_reference(env.defs, env.instance)
    assert run_chain(env.defs, env.instance, env.platform, SAMPLE_DAYS, lane="backfill").success
    return env


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(f"{field}:"))


def _reset_own_peak() -> int:
    """Start this process's peak memory (VmHWM) afresh, at what it holds now; return that."""
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    return _status("VmRSS")


def _children_peak() -> int:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


@pytest.mark.parametrize("shape", SHAPES)
def test_every_query_shape_is_held_to_the_memory_limit(world, shape):
    build, fits = SHAPES[shape]
    gateway = Gateway(world.platform, QueryLimits(timeout_s=60, memory=CAP))
    assert fits(gateway.query("bi_reader", build(TENTH)))  # what fits the limit still runs

    children_before, rss = _children_peak(), _reset_own_peak()
    with pytest.raises(QueryError) as info:
        gateway.query("bi_reader", build(TEN_TIMES))
    assert str(info.value) == "the query exceeded the memory limit of 256MB and was stopped"
    log = access_log(world.ledger)[-1]
    assert (log["decision"], log["reason"]) == ("error", "memory limit exceeded")
    # This process never held the query's values, and the process that ran it was held to the
    # limit (its peak counts the pages it shared with this one when it was forked).
    assert _status("VmHWM") - rss < CAP_BYTES
    assert _children_peak() <= max(children_before, rss + 2 * CAP_BYTES)


def test_the_time_limit_stops_a_query_the_engine_cannot_interrupt(world):
    # One huge value is built without a pause where DuckDB would notice an interrupt
    # (~13 s here): the query's process is killed at the limit instead.
    gateway = Gateway(world.platform, QueryLimits(timeout_s=0.5, memory="2GB"))
    started = time.monotonic()
    with pytest.raises(QueryError) as info:
        gateway.query("bi_reader", "SELECT length(repeat('x', 1000000000)) AS n")
    assert time.monotonic() - started < 4
    assert str(info.value) == "the query exceeded the time limit of 0.5 s and was stopped"
    assert access_log(world.ledger)[-1]["reason"] == "time limit exceeded"


def test_an_engine_that_dies_is_one_clean_logged_line(world, monkeypatch):
    def crash(self, tables):  # what an allocation DuckDB did not expect to fail does to its process
        os.kill(os.getpid(), signal.SIGSEGV)

    monkeypatch.setattr(Gateway, "_engine", crash)
    with pytest.raises(QueryError) as info:
        Gateway(world.platform, QueryLimits(memory=CAP)).query("bi_reader", "SELECT 1 AS x")
    assert str(info.value) == ("the query stopped the engine (SIGSEGV), most likely at the memory limit of 256MB; "
                               "it is logged for the platform team")
    assert access_log(world.ledger)[-1]["reason"] == "engine crashed (SIGSEGV)"


def test_a_result_streams_back_with_its_types_and_errors_keep_their_kind():
    def engine():
        return duckdb.connect(":memory:")

    result = run_in_child(engine, "SELECT i, i::VARCHAR AS s, [i, i] AS l FROM range(200000) t(i)",
                          memory_bytes=CAP_BYTES, timeout_s=30, batch_rows=65_536)
    assert result.num_rows == 200_000 and result.column_names == ["i", "s", "l"]
    assert result.slice(199_999).to_pylist() == [{"i": 199_999, "s": "199999", "l": [199_999, 199_999]}]
    with pytest.raises(duckdb.ConversionException, match="Could not convert string 'x' to INT32"):
        run_in_child(engine, "SELECT CAST('x' AS INTEGER) AS x", memory_bytes=CAP_BYTES, timeout_s=30, batch_rows=10)
    with pytest.raises(EngineFailed, match="^ZeroDivisionError in the engine process$"):
        run_in_child(lambda: 1 / 0, "SELECT 1", memory_bytes=CAP_BYTES, timeout_s=30, batch_rows=10)


@pytest.mark.parametrize("flags,env,says", [
    (["--timeout", "nan"], {}, "--timeout must be a number of seconds above 0 and at most 86400, such as 30 or 2.5, "
                               "not nan"),
    (["--timeout", "inf"], {}, "--timeout must be a number of seconds above 0"),
    (["--timeout", "-1"], {}, "--timeout must be a number of seconds above 0"),
    (["--memory", "lots"], {}, "--memory must be a size such as 512MB, 1GB or 2GiB"),
    (["--memory", "100000TB"], {}, "--memory '100000TB' is more than this machine's memory"),
    ([], {"ATLASMART_QUERY_MEMORY": "lots"}, "ATLASMART_QUERY_MEMORY must be a size such as 512MB, 1GB or 2GiB "
                                             "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"),
    ([], {"ATLASMART_QUERY_TIMEOUT_S": "nan"}, "ATLASMART_QUERY_TIMEOUT_S must be a number of seconds above 0"),
    ([], {"ATLASMART_QUERY_TIMEOUT_S": "soon"}, "ATLASMART_QUERY_TIMEOUT_S must be a number of seconds above 0"),
], ids=["timeout-nan", "timeout-inf", "timeout-negative", "memory-words", "memory-beyond-machine", "env-memory",
        "env-timeout-nan", "env-timeout-words"])
def test_a_bad_limit_setting_is_a_usage_error_and_nothing_runs(world, monkeypatch, capsys, flags, env, says):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    before = len(access_log(world.ledger))
    argv = ["--home", str(world.home), "--landing", str(world.landing), "query", "--as", "bi_reader", *flags]
    assert main([*argv, "SELECT 1 AS x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("atlasmart: error: ") and says in err and err.count("\n") == 1, err
    assert len(access_log(world.ledger)) == before


def _children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                if entry.isdigit() and int(stat.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["ctrl-c", "kill-parent"])
def test_a_query_never_outlives_its_command(world, stop):
    command = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "atlasmart"), "--home", str(world.home), "--landing",
         str(world.landing), "query", "--as", "bi_reader", "--timeout", "300",
         "SELECT max(i * 2) AS m FROM range(20000000000) t(i)"],
        start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (engines := _children_of(command.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert engines, "the query ran in no process of its own"
        if stop == "ctrl-c":
            os.killpg(command.pid, signal.SIGINT)  # as a terminal sends it
        else:
            os.kill(command.pid, signal.SIGKILL)
        _, err = command.communicate(timeout=30)
        if stop == "ctrl-c":
            assert (command.returncode, err) == (130, "atlasmart: interrupted\n")
        deadline = time.monotonic() + 10
        while any(_running(pid) for pid in engines) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_running(pid) for pid in engines)
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
