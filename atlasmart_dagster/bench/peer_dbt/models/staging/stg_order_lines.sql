{# Accepted order line versions of the window; the newest accepted version of a key is current. #}
SELECT partition_date AS sales_date, order_id, line_no, source_seq, batch_id, source_row,
       event_ts, customer_id, product_id, channel, quantity, line_amount_usd, line_cost_usd, status,
       true AS is_current
FROM {{ ref('stg_order_lines_gated') }}
WHERE reason IS NULL AND key_rows = 1
UNION ALL
SELECT partition_date AS sales_date, order_id, line_no, source_seq, batch_id, source_row,
       event_ts, customer_id, product_id, channel, quantity, line_amount_usd, line_cost_usd, status,
       row_number() OVER (
           PARTITION BY partition_date, order_id, line_no
           ORDER BY source_seq DESC, batch_id DESC, source_row DESC) = 1 AS is_current
FROM {{ ref('stg_order_lines_gated') }}
WHERE reason IS NULL AND key_rows > 1
