{#
  Every landed row of the window ends in exactly one output of the gate:
  staged + quarantined = the batch's rows (as the manifest promises).
  Returns the days that do not add up.
#}
{{ config(meta={'dagster': {'ref': {'name': 'stg_order_lines'}}}) }}

WITH promised AS (
    SELECT "partition" AS sales_date, expected_rows
    FROM read_json({{ landing_files('_manifest.json') }}, columns = {'partition': 'DATE', 'expected_rows': 'BIGINT'})
),
staged AS (
    SELECT sales_date, count(*) AS n FROM {{ ref('stg_order_lines') }} WHERE {{ in_window('sales_date') }} GROUP BY ALL
),
quarantined AS (
    SELECT sales_date, count(*) AS n FROM {{ ref('quarantine_order_lines') }} WHERE {{ in_window('sales_date') }} GROUP BY ALL
)
SELECT p.sales_date, p.expected_rows, coalesce(s.n, 0) AS staged, coalesce(q.n, 0) AS quarantined
FROM promised p
LEFT JOIN staged s USING (sales_date)
LEFT JOIN quarantined q USING (sales_date)
WHERE p.expected_rows <> coalesce(s.n, 0) + coalesce(q.n, 0)
