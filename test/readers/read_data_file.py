"""Reads Parquet files tidemark wrote as an Iceberg table's data files (issue 30), with readers
tidemark did not write, and prints one JSON object on stdout.

  .venv-readers/bin/python test/readers/read_data_file.py --dir DIR \
      --metadata DIR/v1.metadata.json --parquet DIR/a.parquet [--parquet DIR/b.parquet ...] \
      [--rename OLD=NEW ...]

1. pyarrow: the field id of every element of each file's Parquet schema, as the schema itself
   holds it (pyarrow's text of the Parquet schema, `field_id=N name` per element, -1 for none),
   not the Arrow schema stored in the footer.
2. pyiceberg: registers a table from the metadata file in a SQL catalog (sqlite in DIR), adds the
   files as data files in one append, renames columns as --rename asks (Iceberg's rename: the
   field id stays, the files keep the old name, so only a read by id finds their values) and
   scans the table. Each file's data-file entry is what add_files builds (its schema checked
   against the table's by field id, its statistics taken from the footer); where that refuses
   the file, the refusal is reported (`stats_errors`) and the file is added without statistics,
   so the scan still shows whether the file reads.

Output: {"parquet_ids": [[[name, id], ...] per file], "stats_errors": ["file: message"],
"schema": [{"id", "name", "type", "required"}], "rows": [{column: value}]}. Exit 1 with {"error": "..."} on stderr.
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import dumps  # noqa: E402

# One Parquet schema element per line: `optional int32 field_id=3 c2 (Int(bitWidth=8, ...));`
ELEMENT = re.compile(r"field_id=(-?\d+) ([^\s;({]+)")


def parquet_ids(path: str) -> list:
    import pyarrow.parquet as pq

    text = str(pq.ParquetFile(path).schema)
    return [[m.group(2), int(m.group(1))] for m in ELEMENT.finditer(text)]


def data_file(table, path: str, errors: list):
    """The file's entry as add_files builds it; without statistics where that refuses."""
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import parquet_file_to_data_file
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.typedef import Record

    try:
        return parquet_file_to_data_file(table.io, table.metadata, path)
    except ValueError as e:
        errors.append(f"{os.path.basename(path)}: {e}")
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=pq.ParquetFile(path).metadata.num_rows,
        file_size_in_bytes=os.path.getsize(path),
        spec_id=table.metadata.default_spec_id,
        sort_order_id=None,
        equality_ids=None,
        key_metadata=None,
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dir", required=True, help="a scratch folder for the catalog")
    p.add_argument("--metadata", required=True, help="the table's metadata JSON file")
    p.add_argument("--parquet", action="append", required=True, help="a data file (repeatable)")
    p.add_argument("--rename", action="append", default=[], help="OLD=NEW: rename a column after adding")
    a = p.parse_args()
    try:
        ids = [parquet_ids(f) for f in a.parquet]
        from pyiceberg.catalog.sql import SqlCatalog

        os.makedirs(a.dir, exist_ok=True)

        catalog = SqlCatalog("lake", uri=f"sqlite:///{a.dir}/catalog.db", warehouse=f"file://{a.dir}/wh")
        catalog.create_namespace("ns")
        catalog.register_table("ns.t", f"file://{a.metadata}")
        table = catalog.load_table("ns.t")
        stats_errors = []
        with table.transaction() as tx:
            with tx.update_snapshot().fast_append() as append:
                for path in a.parquet:
                    append.append_data_file(data_file(table, path, stats_errors))
        if a.rename:
            with table.update_schema() as update:
                for pair in a.rename:
                    old, new = pair.split("=", 1)
                    update.rename_column(old, new)
        table = catalog.load_table("ns.t")
        rows = table.scan().to_arrow().to_pylist()
    except Exception as e:  # noqa: BLE001 - the test wants the message
        sys.stderr.write(dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    out = {
        "parquet_ids": ids,
        "stats_errors": stats_errors,
        "schema": [
            {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
            for f in table.schema().fields
        ],
        "rows": rows,
    }
    sys.stdout.write(dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
