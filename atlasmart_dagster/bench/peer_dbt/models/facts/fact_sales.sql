{# The current accepted paid version of each order line of the window. #}
SELECT sales_date, order_id, line_no, event_ts, customer_id, product_id, channel, quantity,
       line_amount_usd AS revenue_usd,
       line_cost_usd AS cost_usd,
       CAST(line_amount_usd - line_cost_usd AS DECIMAL(18,2)) AS gross_profit_usd,
       batch_id, source_seq
FROM {{ ref('stg_order_lines') }}
WHERE {{ in_window('sales_date') }} AND is_current AND status = '{{ var("paid_status") }}'
