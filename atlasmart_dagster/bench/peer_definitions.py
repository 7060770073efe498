"""The peer as a code location, for ``dagster asset materialize -m atlasmart_dagster.bench.peer_definitions``.

The benchmark's cold scenario times the peer's own command-line run of one
partition, as it does ours. Loading this module builds ``defs`` from the
environment the benchmark sets (``peer.peer_environment``): the dbt target
folder holding the prepared manifest (``DBT_TARGET_PATH``), the DuckDB file
and the landing zone the dbt project reads, and the first partition
(``ATLASMART_FIRST_SALES_DATE``). A code location must build its definitions
when it is loaded, so this is the one place the peer reads them at import.
"""

import os

from ..settings import current
from .peer import TARGET_ENV, build_peer_definitions

defs = build_peer_definitions(os.environ[TARGET_ENV], current().first_sales_date)
