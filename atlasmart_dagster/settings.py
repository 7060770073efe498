"""Every ``ATLASMART_*`` setting, declared once: its variable, type, default, accepted form and one-line doc.

``Settings`` is a frozen view of one environment: ``Settings.from_environ(env)``
copies the ``ATLASMART_*`` variables of ``env``, and each attribute
(``settings.queue_timeout``) is that variable parsed and checked when it is
asked for. A value of the wrong form is a ``UsageError`` (exit 2 on the
command line) whose message names the variable and the form it accepts; a
variable unset, empty or blank is its default. A bad value of one setting
never stops a command that does not read it.

``current()`` is the environment of this process now: cheap (a copy of a few
strings), so a value read at call time stays read at call time (a test that
sets a variable after import, a process whose environment changes between
commands). Only what shapes the definitions is read once, where the code
location loads, and that module says why beside it (``defs/partitions.py``,
``defs/retries.py``, ``definitions.py``).

``SETTINGS`` is the registry: the settings table of ``docs/deploying.md``
holds one row for each, and ``atlasmart_dagster_tests/test_docs.py`` keeps
the two equal. Some are read outside the package (``scripts/dev``, the test
suite, the dbt peer's profile), and some are set by our own commands for the
processes they start; each is declared here all the same, so the table and
the registry are one list. "Adding a setting" in ``docs/deploying.md`` says
how to add one.

This module imports nothing of the package but ``errors``, and that only when
a value is refused (``errors`` loads DuckDB; the command line's cold start
must not).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from types import MappingProxyType
from typing import Any, Generic, TypeVar, overload

PREFIX = "ATLASMART_"
T = TypeVar("T")


class SettingError(ValueError):
    """A value of the wrong form; the message names the variable (or option) and the form accepted."""


def _refused(message: str) -> Exception:
    from .errors import UsageError  # local: errors loads DuckDB, which the command line's cold start must not

    return UsageError(message)


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One variable: ``parse`` turns its text into the value or raises ``SettingError``; unset or blank: ``default``.

    Declared as an attribute of ``Settings``, it reads as that value on an instance (``settings.home``) and
    as itself on the class (``Settings.home.name``).
    """

    name: str
    parse: Callable[[str], T]
    default: T
    doc: str

    def read(self, environ: Mapping[str, str]) -> T:
        """The value in ``environ``; a value of the wrong form raises ``UsageError``."""
        text = environ.get(self.name)
        if text is None or not text.strip():
            return self.default
        try:
            return self.parse(text)
        except SettingError as exc:
            raise _refused(str(exc)) from None

    def problem(self, environ: Mapping[str, str]) -> str | None:
        """Why the value in ``environ`` is refused, or None (also when it is unset): a check that raises nothing."""
        text = environ.get(self.name)
        if text is None or not text.strip():
            return None
        try:
            self.parse(text)
        except SettingError as exc:
            return str(exc)
        return None

    @overload
    def __get__(self, settings: None, owner: type | None = None) -> Setting[T]: ...

    @overload
    def __get__(self, settings: Settings, owner: type | None = None) -> T: ...

    def __get__(self, settings, owner=None):
        return self if settings is None else self.read(settings.environ)


# -- the forms ----------------------------------------------------------------------------------------


def _text(text: str) -> str:
    return text


def is_iso_day(text: str) -> bool:
    """Whether ``text`` is a calendar day written YYYY-MM-DD (the form of every partition key and date option)."""
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", text))


DEFAULT_FIRST_SALES_DATE = "2026-09-17"
# The earliest history a deployment may migrate: older days are not sales this product ever held.
EARLIEST_FIRST_SALES_DATE = "2000-01-01"


def _first_sales_date(text: str) -> str:
    today = datetime.now(UTC).date().isoformat()
    accepted = f"expected a day YYYY-MM-DD from {EARLIEST_FIRST_SALES_DATE} to {today} (today, UTC)"
    if not is_iso_day(text):
        raise SettingError(f"$ATLASMART_FIRST_SALES_DATE is {text!r}, not a date: {accepted}")
    if not EARLIEST_FIRST_SALES_DATE <= text <= today:
        raise SettingError(f"$ATLASMART_FIRST_SALES_DATE is {text}, out of range: {accepted}")
    return text


def _last_sales_date(text: str) -> str:
    # Its bound, the first partition, is another setting: defs/last_sales_date.py checks the two together.
    if not is_iso_day(text):
        raise SettingError(f"$ATLASMART_LAST_SALES_DATE is {text!r}, not a date: expected a day YYYY-MM-DD "
                           "from the first partition on")
    return text


CLOCKS = ("system", "logical")


def _clock(text: str) -> str:
    mode = text.strip().lower()
    if mode not in CLOCKS:
        raise SettingError(f"the clock must be 'system' or 'logical', not {mode!r} (--clock or $ATLASMART_CLOCK)")
    return mode


EXECUTORS = ("in_process", "celery")


def _executor(text: str) -> str:
    if text not in EXECUTORS:
        raise SettingError(f"$ATLASMART_EXECUTOR must be 'in_process' or 'celery', not {text!r}")
    return text


def _backfill_run_days(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise SettingError(f"$ATLASMART_BACKFILL_RUN_DAYS must be a whole number of days (>= 1), not {text!r}")
    return int(text)


DEFAULT_STORAGE_RETRY_WINDOW = 60.0
MAX_STORAGE_RETRY_WINDOW = 3600.0


def _storage_retry_window(text: str) -> float:
    try:
        window = float(text.strip())
    except ValueError:
        window = -1.0
    if not 0 <= window <= MAX_STORAGE_RETRY_WINDOW:
        raise SettingError(f"$ATLASMART_STORAGE_RETRY_WINDOW must be a number of seconds from 0 to "
                           f"{MAX_STORAGE_RETRY_WINDOW:.0f}, not {text.strip()!r}")
    return window


DEFAULT_QUEUE_TIMEOUT = 3600.0


def _queue_timeout(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise SettingError(f"$ATLASMART_QUEUE_TIMEOUT must be a positive number of seconds, not {text!r}")
    return seconds


DEFAULT_QUERY_TIMEOUT_S = 30.0
MAX_QUERY_TIMEOUT_S = 24 * 3600.0  # a consumer query that needs more is a job, not a query
TIMEOUT_FORMS = f"a number of seconds above 0 and at most {MAX_QUERY_TIMEOUT_S:g}, such as 30 or 2.5"


def query_timeout(seconds: float, source: str, text: str | None = None) -> float:
    """``seconds`` if it is a query time limit (above 0, at most a day), else ``SettingError`` naming ``source``."""
    if not (isinstance(seconds, (int, float)) and 0 < seconds <= MAX_QUERY_TIMEOUT_S):  # also refuses nan and inf
        raise SettingError(f"{source} must be {TIMEOUT_FORMS}, not {seconds if text is None else text!r}")
    return float(seconds)


def _query_timeout_s(text: str) -> float:
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        raise SettingError(f"ATLASMART_QUERY_TIMEOUT_S must be {TIMEOUT_FORMS}, not {text!r}") from None
    return query_timeout(seconds, "ATLASMART_QUERY_TIMEOUT_S", text)


DEFAULT_QUERY_MEMORY = "1GB"
MEMORY_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
                "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}  # as DuckDB reads them
MEMORY_FORMS = ("a size such as 512MB, 1GB or 2GiB (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), "
                "at most the machine's memory")


def machine_memory() -> int:
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def memory_size(size: str, source: str) -> int:
    """The bytes of a DuckDB size (``512MB``, ``2GiB``) at most the machine's memory, else ``SettingError``."""
    match = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$", size, re.IGNORECASE) if isinstance(size, str) else None
    if not match or match[2].lower() not in MEMORY_UNITS or float(match[1]) <= 0:
        raise SettingError(f"{source} must be {MEMORY_FORMS}, not {size!r}")
    size_bytes = int(float(match[1]) * MEMORY_UNITS[match[2].lower()])
    if size_bytes > machine_memory():
        raise SettingError(f"{source} {size!r} is more than this machine's memory ({machine_memory() / 1e9:.1f}GB): "
                           f"it must be {MEMORY_FORMS}")
    return size_bytes


def _query_memory(text: str) -> str:
    text = text.strip()
    memory_size(text, "ATLASMART_QUERY_MEMORY")
    return text


def _flag(text: str) -> bool:
    return text.strip() == "1"


# -- the settings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The ``ATLASMART_*`` variables of one environment; each attribute is one setting, parsed when read.

    The attributes are the registry: one ``Setting`` each, named as its
    variable without the prefix, in lower case, in the order of the settings
    table of ``docs/deploying.md``.
    """

    environ: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """The settings of ``environ`` (``os.environ``, a subprocess's env, a test's dict), copied: later changes
        to ``environ`` do not change them."""
        return cls(MappingProxyType({k: v for k, v in environ.items() if k.startswith(PREFIX)}))

    def problems(self) -> dict[str, str]:
        """Every setting whose value is refused, with why (a deployment's check of all of them at once)."""
        return {s.name: why for s in registry(type(self)) if (why := s.problem(self.environ))}

    # where the home is
    home = Setting("ATLASMART_HOME", _text, None, "the home folder (unset: ./.atlasmart in the working directory)")
    landing = Setting("ATLASMART_LANDING", _text, None,
                      "the ERP landing folder to load (unset: the sample bundled in the package)")
    clock = Setting("ATLASMART_CLOCK", _clock, None,
                    "system or logical: the clock this process asks for (unset: the home's clock)")
    # Read when the code location loads: the partitions definition is built from it (defs/partitions.py).
    first_sales_date = Setting("ATLASMART_FIRST_SALES_DATE", _first_sales_date, DEFAULT_FIRST_SALES_DATE,
                               "the first daily partition, YYYY-MM-DD from 2000-01-01 to today UTC")
    # Read when the code location loads, for the same reason (defs/last_sales_date.py checks it against the first).
    last_sales_date = Setting("ATLASMART_LAST_SALES_DATE", _last_sales_date, None,
                              "the last daily partition, YYYY-MM-DD (unset: yesterday UTC, as the clock moves)")
    # team mode (store/home.py checks that both or neither are set, and the URL's form)
    database_url = Setting("ATLASMART_DATABASE_URL", _text, None,
                           "postgresql://USER@HOST:5432/DB: the team's ledger, catalog and Dagster instance")
    warehouse = Setting("ATLASMART_WAREHOUSE", _text, None,
                        "the team's shared folder or s3://bucket/prefix of table files and raw batches")
    s3_endpoint = Setting("ATLASMART_S3_ENDPOINT", _text, None,
                          "with an s3:// warehouse, the S3 API to use (unset: AWS's own endpoints)")
    # Read when the code location loads (definitions.py): the executor is part of the definitions.
    executor = Setting("ATLASMART_EXECUTOR", _executor, "in_process",
                       "in_process or celery: where the steps of a run execute")
    celery_broker = Setting("ATLASMART_CELERY_BROKER", _text, None,
                            "the Celery broker URL (amqp:// or redis://), read by dagster-celery from the environment")
    celery_queue = Setting("ATLASMART_CELERY_QUEUE", _text, "dagster",
                           "the broker queue steps are sent to and workers take")
    celery_worker_config = Setting("ATLASMART_CELERY_WORKER_CONFIG", _text, None,
                                   "the worker yaml a Celery worker builds its app from (set by the worker command)")
    # Read when the code location loads (defs/partitions.py): the assets' backfill policy.
    backfill_run_days = Setting("ATLASMART_BACKFILL_RUN_DAYS", _backfill_run_days, None,
                                "N >= 1: a range backfill runs as runs of N days (unset: one run per range)")
    # Read when the code location loads (defs/retries.py): a retry policy is part of the assets' definitions.
    storage_retry_window = Setting("ATLASMART_STORAGE_RETRY_WINDOW", _storage_retry_window,
                                   DEFAULT_STORAGE_RETRY_WINDOW,
                                   "seconds (0 to 3600) a step's retries of a transient storage fault must span")
    queue_timeout = Setting("ATLASMART_QUEUE_TIMEOUT", _queue_timeout, DEFAULT_QUEUE_TIMEOUT,
                            "seconds above 0 a team-mode command waits for its queued work")
    workspace = Setting("ATLASMART_WORKSPACE", _text, None,
                        "the workspace file `dagster job launch` reads (unset: one written for the call)")
    query_timeout_s = Setting("ATLASMART_QUERY_TIMEOUT_S", _query_timeout_s, DEFAULT_QUERY_TIMEOUT_S,
                              "the time limit of one gateway query, in seconds")
    query_memory = Setting("ATLASMART_QUERY_MEMORY", _query_memory, DEFAULT_QUERY_MEMORY,
                           "the memory limit of one gateway query (512MB, 1GB, 2GiB, ...)")
    notifications = Setting("ATLASMART_NOTIFICATIONS", _text, None,
                            "the notification channels and routes file (unset: <home>/notifications.yaml)")
    # the benchmark
    bench_postgres = Setting("ATLASMART_BENCH_POSTGRES", _text, "postgresql://postgres@127.0.0.1:5432/postgres",
                             "the PostgreSQL server the benchmark's team scenarios create scratch databases on")
    peer_duckdb = Setting("ATLASMART_PEER_DUCKDB", _text, None,
                          "the dagster-dbt peer's DuckDB file (set by atlasmart bench, read by the dbt profile)")
    peer_landing = Setting("ATLASMART_PEER_LANDING", _text, None,
                           "the landing folder the peer's dbt project reads (set by atlasmart bench)")
    # development: read by scripts/dev and the test suite, not by the package
    venv = Setting("ATLASMART_VENV", _text, ".venv", "the virtual environment scripts/dev creates and runs in")
    test_postgres = Setting("ATLASMART_TEST_POSTGRES", _text, "postgresql://postgres@127.0.0.1:5432/postgres",
                            "the server the team-mode tests create throwaway databases on")
    test_artifacts = Setting("ATLASMART_TEST_ARTIFACTS", _text, None,
                             "where the UI browser test keeps its screenshots (unset: its scratch folder)")
    test_s3_local = Setting("ATLASMART_TEST_S3_LOCAL", _text, "../shared/tools/s3-local.sh",
                            "the script the object-storage tests start a real S3 server with")
    test_s3_started_mark = Setting("ATLASMART_TEST_S3_STARTED_MARK", _text, None,
                                   "the file a test worker leaves when it starts the S3 server (set by the run)")
    test_workers = Setting("ATLASMART_TEST_WORKERS", _text, None,
                           "pytest-xdist workers of scripts/dev test (unset: one per core, at most 4; 0: none)")
    update_snapshot = Setting("ATLASMART_UPDATE_SNAPSHOT", _flag, False,
                              "1 rewrites the definitions snapshot of test_definitions.py")


def registry(settings_class: type[Settings] = Settings) -> tuple[Setting[Any], ...]:
    """The settings ``settings_class`` declares (a subclass's after its bases'), in declaration order."""
    found: dict[str, Setting[Any]] = {}
    for klass in reversed(settings_class.__mro__):
        found.update({attr: value for attr, value in vars(klass).items() if isinstance(value, Setting)})
    return tuple(found.values())


SETTINGS = registry()
BY_NAME = {s.name: s for s in SETTINGS}


def current() -> Settings:
    """The settings of this process's environment as it is now (read each call: cheap)."""
    return Settings.from_environ(os.environ)
