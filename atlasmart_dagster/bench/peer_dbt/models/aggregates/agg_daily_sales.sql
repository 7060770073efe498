{# One row per sales_date of the window with the control tuple; a day with no paid lines has zeros. #}
SELECT d.sales_date,
       CAST(coalesce(c.paid_lines, 0) AS BIGINT) AS paid_lines,
       CAST(coalesce(c.orders, 0) AS BIGINT) AS orders,
       CAST(coalesce(c.units, 0) AS BIGINT) AS units,
       CAST(coalesce(c.revenue_usd, 0) AS DECIMAL(18,2)) AS revenue_usd,
       CAST(coalesce(c.cost_usd, 0) AS DECIMAL(18,2)) AS cost_usd,
       CAST(coalesce(c.gross_profit_usd, 0) AS DECIMAL(18,2)) AS gross_profit_usd
FROM {{ window_days() }} d
LEFT JOIN (
    SELECT sales_date,
           count(*) AS paid_lines,
           count(DISTINCT order_id) AS orders,
           sum(quantity) AS units,
           sum(revenue_usd) AS revenue_usd,
           sum(cost_usd) AS cost_usd,
           sum(gross_profit_usd) AS gross_profit_usd
    FROM {{ ref('fact_sales') }}
    WHERE {{ in_window('sales_date') }}
    GROUP BY sales_date
) c USING (sales_date)
