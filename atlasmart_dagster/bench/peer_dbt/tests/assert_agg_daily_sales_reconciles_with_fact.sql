{#
  agg_daily_sales = fact_sales: every day of the window has the same control
  tuple in the aggregate as computed from the fact rows (a day without paid
  lines must be zeros). Returns the days that disagree.
#}
{{ config(meta={'dagster': {'ref': {'name': 'agg_daily_sales'}}}) }}

WITH fact AS (
    SELECT sales_date, count(*) AS paid_lines, count(DISTINCT order_id) AS orders, sum(quantity) AS units,
           sum(revenue_usd) AS revenue_usd, sum(cost_usd) AS cost_usd, sum(gross_profit_usd) AS gross_profit_usd
    FROM {{ ref('fact_sales') }}
    WHERE {{ in_window('sales_date') }}
    GROUP BY sales_date
),
agg AS (
    SELECT * FROM {{ ref('agg_daily_sales') }} WHERE {{ in_window('sales_date') }}
)
SELECT d.sales_date,
       a.paid_lines AS agg_paid_lines, f.paid_lines AS fact_paid_lines,
       a.revenue_usd AS agg_revenue_usd, f.revenue_usd AS fact_revenue_usd
FROM {{ window_days() }} d
LEFT JOIN agg a USING (sales_date)
LEFT JOIN fact f USING (sales_date)
WHERE a.sales_date IS NULL
   OR (a.paid_lines, a.orders, a.units, a.revenue_usd, a.cost_usd, a.gross_profit_usd)
      IS DISTINCT FROM (coalesce(f.paid_lines, 0), coalesce(f.orders, 0), coalesce(f.units, 0),
                        coalesce(f.revenue_usd, 0), coalesce(f.cost_usd, 0), coalesce(f.gross_profit_usd, 0))
