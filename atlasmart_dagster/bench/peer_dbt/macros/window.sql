{# The daily window a run builds: [var('min_date'), var('max_date')), ISO dates passed by Dagster. #}

{% macro window_bounds() %}
  {%- set min_date, max_date = var('min_date'), var('max_date') -%}
  {%- if execute and (min_date is none or max_date is none) -%}
    {{ exceptions.raise_compiler_error("the peer builds daily partitions: pass --vars with min_date and max_date") }}
  {%- endif -%}
  {{ return((min_date or '1970-01-01', max_date or '1970-01-02')) }}
{% endmacro %}

{% macro in_window(column='sales_date') %}
  {%- set bounds = window_bounds() -%}
  {{ column }} >= DATE '{{ bounds[0] }}' AND {{ column }} < DATE '{{ bounds[1] }}'
{%- endmacro %}

{# One row per day of the window: a loaded day with no sales still gets its (zero) row. #}
{% macro window_days() %}
  {%- set bounds = window_bounds() -%}
  (SELECT CAST(range AS DATE) AS sales_date FROM range(DATE '{{ bounds[0] }}', DATE '{{ bounds[1] }}', INTERVAL 1 DAY))
{%- endmacro %}

{# Pre-hook of every partitioned model: the window is replaced whole, never appended to. #}
{% macro delete_window() %}
  {%- if is_incremental() -%}
    DELETE FROM {{ this }} WHERE {{ in_window('sales_date') }}
  {%- endif -%}
{% endmacro %}

{# The landing files of the window, one per day: <landing>/sales_date=<day>/<name>. #}
{% macro landing_files(name) %}
  {%- set bounds = window_bounds() -%}
  {%- set landing = env_var('ATLASMART_PEER_LANDING', '') -%}
  {%- if execute and not landing -%}
    {{ exceptions.raise_compiler_error("set ATLASMART_PEER_LANDING to the landing folder") }}
  {%- endif -%}
  {%- set first = modules.datetime.date.fromisoformat(bounds[0]) -%}
  {%- set days = (modules.datetime.date.fromisoformat(bounds[1]) - first).days -%}
  [{%- for n in range(days) -%}
    '{{ landing }}/sales_date={{ (first + modules.datetime.timedelta(days=n)).isoformat() }}/{{ name }}'{{ ", " if not loop.last }}
  {%- endfor -%}]
{%- endmacro %}

{% macro sql_list(values) -%}
  {%- for v in values %}'{{ v }}'{{ ", " if not loop.last }}{% endfor -%}
{%- endmacro %}
