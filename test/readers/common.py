"""Shared by the test readers (issue 30): catalogs from command-line flags, JSON for values.

Python here is for tests only: these scripts read what tidemark wrote with readers we did not
write (pyiceberg, Spark). Values are printed so a TypeScript test can compare them exactly:
decimals as fixed-point strings with the column's scale, timestamps as ISO 8601 with microseconds, binary as hex, int64 as JSON
numbers only while exact (|v| <= 2^53), else strings.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import math
import uuid

EXACT_INT = 2**53


def to_json_value(v):
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return v if -EXACT_INT <= v <= EXACT_INT else str(v)
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, decimal.Decimal):
        return format(v, "f")  # fixed point with the column's scale: "0.500000000", never "5E-1"
    if isinstance(v, dt.datetime):
        return v.isoformat(timespec="microseconds")
    if isinstance(v, (dt.date, dt.time)):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if isinstance(v, dict):
        return {str(k): to_json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_json_value(x) for x in v]
    if hasattr(v, "asDict"):  # pyspark Row
        return to_json_value(v.asDict(recursive=True))
    return str(v)


def dumps(obj) -> str:
    return json.dumps(to_json_value(obj), separators=(",", ":"), sort_keys=False)


def add_catalog_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--catalog", required=True, choices=["sql", "glue", "rest", "static"],
                   help="sql: a SQL catalog (--uri sqlite:///... and --warehouse); "
                        "glue: the Glue Data Catalog (--glue-endpoint for moto); "
                        "rest: an Iceberg REST catalog (--uri http://..., --token); "
                        "static: one metadata.json file (--metadata), no catalog")
    p.add_argument("--name", default="lake", help="catalog name (the SQL catalog's catalog_name)")
    p.add_argument("--uri", help="sql: SQLAlchemy URI, e.g. sqlite:////tmp/x/catalog.db; rest: the catalog's base URI")
    p.add_argument("--token", help="rest: a bearer token")
    p.add_argument("--warehouse", help="warehouse location, e.g. file:///tmp/x/warehouse or s3://bucket/wh")
    p.add_argument("--metadata", help="static: a metadata.json location")
    p.add_argument("--region", default="us-east-1")
    p.add_argument("--glue-endpoint", help="glue: endpoint URL (moto: http://127.0.0.1:PORT)")
    p.add_argument("--s3-endpoint", help="S3 endpoint URL (moto: http://127.0.0.1:PORT)")
    p.add_argument("--access-key-id", default=None)
    p.add_argument("--secret-access-key", default=None)


def fileio_props(a) -> dict:
    props = {}
    if a.s3_endpoint:
        props["s3.endpoint"] = a.s3_endpoint
        props["s3.region"] = a.region
    if a.access_key_id:
        props["s3.access-key-id"] = a.access_key_id
        props["s3.secret-access-key"] = a.secret_access_key
    return props


def load_catalog_from_args(a):
    """Returns a pyiceberg catalog (None for --catalog static)."""
    if a.catalog == "sql":
        from pyiceberg.catalog.sql import SqlCatalog

        return SqlCatalog(a.name, uri=a.uri, warehouse=a.warehouse, **fileio_props(a))
    if a.catalog == "rest":
        from pyiceberg.catalog.rest import RestCatalog

        props = {"uri": a.uri, **fileio_props(a)}
        if a.warehouse:
            props["warehouse"] = a.warehouse
        if a.token:
            props["token"] = a.token
        return RestCatalog(a.name, **props)
    if a.catalog == "glue":
        from pyiceberg.catalog.glue import GlueCatalog

        props = {"glue.region": a.region, **fileio_props(a)}
        if a.glue_endpoint:
            props["glue.endpoint"] = a.glue_endpoint
        if a.access_key_id:
            props["glue.access-key-id"] = a.access_key_id
            props["glue.secret-access-key"] = a.secret_access_key
        if a.warehouse:
            props["warehouse"] = a.warehouse
        return GlueCatalog(a.name, **props)
    return None


def load_table_from_args(a, table: str | None):
    if a.catalog == "static":
        from pyiceberg.table import StaticTable

        return StaticTable.from_metadata(a.metadata, properties=fileio_props(a))
    return load_catalog_from_args(a).load_table(table)
