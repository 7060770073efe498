"""Operating the product: runs, backfills, recovery, maintenance, incidents, access and observability."""
