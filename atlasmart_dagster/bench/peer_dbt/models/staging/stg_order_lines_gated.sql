{#
  The quality gate over the window's landed rows: every row typed by the
  contract and labelled with the first rule it breaks (reason NULL = accepted).
  Same rules and order as atlasmart_dagster/transforms/staging.py:
  type_error, null_required_field, wrong_partition, non_positive_quantity,
  negative_amount, out_of_range, unknown_channel, unknown_status, duplicate_key.
#}
{%- set fields = var('contract_fields') -%}
{%- set content = "row_sales_date, event_ts, customer_id, product_id, channel, quantity, line_amount_usd, line_cost_usd, status" -%}
{%- set out_of_range = "quantity > " ~ var('max_quantity') ~ " OR line_amount_usd > " ~ var('max_line_usd') ~ " OR line_cost_usd > " ~ var('max_line_usd') -%}

WITH landed AS (
    SELECT CAST(regexp_extract(filename, 'sales_date=([0-9-]+)', 1) AS DATE) AS partition_date,
           CAST(file_row_number + 1 AS INTEGER) AS source_row,
           *
    FROM read_parquet({{ landing_files('order_lines.parquet') }}, filename = true, file_row_number = true)
),
manifests AS (
    SELECT "partition" AS partition_date, batch_id
    FROM read_json({{ landing_files('_manifest.json') }},
                   columns = {'partition': 'DATE', 'batch_id': 'VARCHAR', 'expected_rows': 'BIGINT'})
),
typed AS (
    SELECT l.partition_date, m.batch_id, l.source_row,
    {%- for f in fields %}
        {%- set typed_value = "NULLIF(trim(TRY_CAST(l." ~ f.name ~ " AS VARCHAR)), '')" if f.type == 'VARCHAR' else "TRY_CAST(l." ~ f.name ~ " AS " ~ f.type ~ ")" %}
        {{ typed_value }} AS {{ 'row_sales_date' if f.name == 'sales_date' else f.name }},
    {%- endfor %}
        NULLIF(concat_ws(','
        {%- for f in fields %}
            {%- set typed_value = "NULLIF(trim(TRY_CAST(l." ~ f.name ~ " AS VARCHAR)), '')" if f.type == 'VARCHAR' else "TRY_CAST(l." ~ f.name ~ " AS " ~ f.type ~ ")" %}
            {%- set blank = "trim(CAST(l." ~ f.name ~ " AS VARCHAR)) = ''" if f.type == 'VARCHAR' else "false" %}
            , CASE WHEN l.{{ f.name }} IS NOT NULL AND NOT ({{ blank }}) AND {{ typed_value }} IS NULL THEN '{{ f.name }}' END
        {%- endfor %}), '') AS type_error_fields
    FROM landed l JOIN manifests m USING (partition_date)
),
judged AS (
    SELECT *,
        CASE
            WHEN type_error_fields IS NOT NULL THEN 'type_error'
            WHEN {% for f in fields %}{{ 'row_sales_date' if f.name == 'sales_date' else f.name }} IS NULL{{ " OR " if not loop.last }}{% endfor %}
                THEN 'null_required_field'
            WHEN row_sales_date <> partition_date THEN 'wrong_partition'
            WHEN quantity <= 0 THEN 'non_positive_quantity'
            WHEN line_amount_usd < 0 OR line_cost_usd < 0 THEN 'negative_amount'
            WHEN {{ out_of_range }} THEN 'out_of_range'
            WHEN channel NOT IN ({{ sql_list(var('channels')) }}) THEN 'unknown_channel'
            WHEN status NOT IN ({{ sql_list(var('statuses')) }}) THEN 'unknown_status'
        END AS rule_reason,
        CASE
            WHEN type_error_fields IS NOT NULL THEN type_error_fields
            WHEN {% for f in fields %}{{ 'row_sales_date' if f.name == 'sales_date' else f.name }} IS NULL{{ " OR " if not loop.last }}{% endfor %}
                THEN concat_ws(','{% for f in fields %}, CASE WHEN {{ 'row_sales_date' if f.name == 'sales_date' else f.name }} IS NULL THEN '{{ f.name }}' END{% endfor %})
            WHEN row_sales_date <> partition_date THEN 'sales_date ' || CAST(row_sales_date AS VARCHAR)
            WHEN quantity <= 0 THEN 'quantity ' || CAST(quantity AS VARCHAR)
            WHEN line_amount_usd < 0 OR line_cost_usd < 0 THEN concat_ws(',',
                CASE WHEN line_amount_usd < 0 THEN 'line_amount_usd' END,
                CASE WHEN line_cost_usd < 0 THEN 'line_cost_usd' END)
            WHEN {{ out_of_range }} THEN concat_ws(',',
                CASE WHEN quantity > {{ var('max_quantity') }} THEN 'quantity ' || CAST(quantity AS VARCHAR) END,
                CASE WHEN line_amount_usd > {{ var('max_line_usd') }} THEN 'line_amount_usd ' || CAST(line_amount_usd AS VARCHAR) END,
                CASE WHEN line_cost_usd > {{ var('max_line_usd') }} THEN 'line_cost_usd ' || CAST(line_cost_usd AS VARCHAR) END)
            WHEN channel NOT IN ({{ sql_list(var('channels')) }}) THEN 'channel ' || channel
            WHEN status NOT IN ({{ sql_list(var('statuses')) }}) THEN 'status ' || CAST(to_json(status) AS VARCHAR)
        END AS rule_detail
    FROM typed
),
repeated AS (
    -- only a key that arrives more than once needs the window (a sort); a key seen once has no previous version
    SELECT partition_date, order_id, line_no, count(*) AS key_rows
    FROM judged GROUP BY ALL HAVING count(*) > 1
),
versions AS (
    SELECT judged.*, CAST(NULL AS BIGINT) AS previous_seq, NULL AS previous_content, CAST(1 AS BIGINT) AS key_rows
    FROM judged ANTI JOIN repeated USING (partition_date, order_id, line_no)
    UNION ALL BY NAME
    -- invalid rows carry no content; IGNORE NULLS lets a valid row see the previous valid version
    SELECT judged.*,
        lag(CASE WHEN rule_reason IS NULL THEN source_seq END IGNORE NULLS) OVER key_order AS previous_seq,
        lag(CASE WHEN rule_reason IS NULL THEN struct_pack({{ content }}) END IGNORE NULLS) OVER key_order
            AS previous_content,
        repeated.key_rows
    FROM judged JOIN repeated USING (partition_date, order_id, line_no)
    WINDOW key_order AS (PARTITION BY partition_date, order_id, line_no ORDER BY source_seq, batch_id, source_row)
)
SELECT * EXCLUDE (previous_seq, previous_content, rule_reason, rule_detail),
    coalesce(rule_reason, CASE WHEN previous_seq IS NOT NULL
                               AND previous_content IS NOT DISTINCT FROM struct_pack({{ content }})
                          THEN 'duplicate_key' END) AS reason,
    coalesce(rule_detail, CASE WHEN previous_seq IS NOT NULL
                               AND previous_content IS NOT DISTINCT FROM struct_pack({{ content }})
                          THEN 'exact re-send of source_seq ' || CAST(previous_seq AS VARCHAR) END) AS reason_detail
FROM versions
