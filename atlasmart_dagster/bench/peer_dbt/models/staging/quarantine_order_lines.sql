{# Rows of the window the quality gate refused, one reason per row. #}
SELECT partition_date AS sales_date, batch_id, source_row, source_seq, order_id, line_no,
       reason, reason_detail, row_sales_date, event_ts, customer_id, product_id, channel, quantity,
       line_amount_usd, line_cost_usd, status
FROM {{ ref('stg_order_lines_gated') }}
WHERE reason IS NOT NULL
