{# The grain of a model: no two rows share the combination of these columns. #}
{% test unique_combination_of_columns(model, combination_of_columns) %}
SELECT {{ combination_of_columns | join(', ') }}, count(*) AS rows_with_key
FROM {{ model }}
GROUP BY {{ combination_of_columns | join(', ') }}
HAVING count(*) > 1
{% endtest %}
