{# Daily sales for finance: the control tuple with governed revenue and margin. #}
SELECT a.sales_date, a.paid_lines, a.orders, a.units,
       r.revenue_usd, a.cost_usd, a.gross_profit_usd,
       {{ gross_margin_pct() }} AS gross_margin_pct,
       r.metric_version
FROM {{ ref('agg_daily_sales') }} a
JOIN ({{ governed_revenue(ref('metric_gross_revenue')) }}) r USING (sales_date)
WHERE {{ in_window('a.sales_date') }}
