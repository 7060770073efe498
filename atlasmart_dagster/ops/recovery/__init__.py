"""Disaster recovery that has actually restored data: backup, restore, verify, rollback, migration, relocation.

The functions an operator's command runs are named here (``from ..ops import recovery``);
each lives in the module its name says.
"""

from .backup import FILE_HOOKS, TEAM_BACKUP, RecoveryError, backup
from .restore import restore
from .rollback import ROLLBACK_ASSETS, rollback_partition
from .verify import fact_rows_sha256, total_fact_controls, verify

__all__ = ["FILE_HOOKS", "ROLLBACK_ASSETS", "TEAM_BACKUP", "RecoveryError", "backup", "fact_rows_sha256", "restore",
           "rollback_partition", "total_fact_controls", "verify"]
