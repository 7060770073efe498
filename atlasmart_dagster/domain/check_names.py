"""Names of every asset check, in one place: each says what must hold."""

# raw_order_lines
MANIFEST_ROWS_MATCH = "manifest_rows_match"
SOURCE_CONTRACT_CONFORMS = "source_contract_conforms"
# stg_order_lines
STAGED_ROWS_RECONCILE = "staged_rows_reconcile"
QUALITY_WITHIN_THRESHOLDS = "quality_within_contract_thresholds"
# fact_sales
GRAIN_UNIQUE = "grain_unique"
NO_NEGATIVE_MONEY = "no_negative_money"
FACT_MATCHES_STAGING = "fact_matches_staging"
# between layers
AGG_MATCHES_FACT = "agg_matches_fact"
METRIC_MATCHES_AGG = "metric_matches_agg"
MART_MATCHES_AGG_AND_METRIC = "mart_matches_agg_and_metric"
CHANNEL_SPLIT_ADDS_UP = "channel_split_adds_up"
# dashboards (consumer side)
GOLDEN_MATCHES_GOVERNED_METRIC = "golden_matches_governed_metric"
