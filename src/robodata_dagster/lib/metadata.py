"""Dagster's own metadata vocabulary for the layer's tables: a Delta-backed materialization names its
table, its column schema (`dagster/column_schema`, from the core's declared pyarrow schema) and the
rows of this partition (`dagster/row_count`), so the UI shows columns and counts per batch."""

from typing import Any

import dagster as dg

COLUMN_SCHEMA = "dagster/column_schema"
ROW_COUNT = "dagster/row_count"


def table_schema(schema: Any) -> dg.TableSchema:
    """A pyarrow schema as a dg.TableSchema (column name, Arrow type, nullability)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(f.name, str(f.type), constraints=dg.TableColumnConstraints(nullable=f.nullable))
            for f in schema
        ]
    )


def delta_metadata(uri: str, schema: Any, rows: int) -> dict[str, Any]:
    """Metadata of one materialization of a Delta table: where, its columns, this partition's rows."""
    return {"table": dg.MetadataValue.path(uri), COLUMN_SCHEMA: table_schema(schema), ROW_COUNT: int(rows)}
