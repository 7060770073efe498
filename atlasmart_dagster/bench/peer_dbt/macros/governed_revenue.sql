{# Governed revenue per day of the window (total and per channel), read from the metric, never from facts. #}
{% macro governed_revenue(metric) %}
    SELECT sales_date, CAST(sum(value_usd) AS DECIMAL(18,2)) AS revenue_usd,
    {%- for c in var('channels') %}
           CAST(sum(value_usd) FILTER (WHERE channel = '{{ c }}') AS DECIMAL(18,2)) AS revenue_{{ c }}_usd,
    {%- endfor %}
           any_value(metric_version) AS metric_version
    FROM {{ metric }}
    WHERE metric_name = '{{ var("metric_name") }}' AND {{ in_window('sales_date') }}
    GROUP BY sales_date
{% endmacro %}

{% macro gross_margin_pct() -%}
    CAST(CASE WHEN r.revenue_usd = 0 THEN 0 ELSE round(a.gross_profit_usd * 100 / r.revenue_usd, 2) END AS DECIMAL(9,2))
{%- endmacro %}
