{#
  The governed metric gross_revenue_usd: sum(revenue_usd) of current accepted
  paid lines of every contract channel, per (sales_date, channel); zero when a
  channel sold nothing, so a loaded day's metric is never missing.
#}
SELECT d.sales_date, ch.channel,
       '{{ var("metric_name") }}' AS metric_name,
       '{{ var("metric_version") }}' AS metric_version,
       CAST(coalesce(m.value_usd, 0) AS DECIMAL(18,2)) AS value_usd
FROM {{ window_days() }} d
CROSS JOIN (VALUES {% for c in var('channels') %}('{{ c }}'){{ ", " if not loop.last }}{% endfor %}) AS ch(channel)
LEFT JOIN (
    SELECT sales_date, channel, CAST(sum(revenue_usd) AS DECIMAL(18,2)) AS value_usd
    FROM {{ ref('fact_sales') }}
    WHERE {{ in_window('sales_date') }} AND channel IN ({{ sql_list(var('channels')) }})
    GROUP BY sales_date, channel
) m USING (sales_date, channel)
