{# Executive revenue: governed revenue, its channel split, profit, margin and order value. #}
SELECT a.sales_date, r.revenue_usd,
       {%- for c in var('channels') %} r.revenue_{{ c }}_usd,{% endfor %}
       a.gross_profit_usd,
       {{ gross_margin_pct() }} AS gross_margin_pct,
       a.orders,
       CAST(CASE WHEN a.orders = 0 THEN 0 ELSE round(r.revenue_usd / a.orders, 2) END AS DECIMAL(18,2))
           AS avg_order_value_usd,
       a.paid_lines, a.units, a.cost_usd,
       r.metric_version
FROM {{ ref('agg_daily_sales') }} a
JOIN ({{ governed_revenue(ref('metric_gross_revenue')) }}) r USING (sales_date)
WHERE {{ in_window('a.sales_date') }}
