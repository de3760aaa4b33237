"""An Iceberg table's partitioning as pyiceberg sees it (issue 30, partition transforms).

  .venv-readers/bin/python test/readers/partition_files.py --catalog static \
      --metadata file:///tmp/x/lake/public.t [--filter "id == 5"]

Output: {"spec": [{"name", "source", "transform"}], "files": [{"path", "records", "partition",
"rows_partitions"}], "planned": N} where `files` are the current snapshot's data files as
pyiceberg plans a full scan, `partition` the file's partition tuple as pyiceberg reads it from the
manifest (by partition field name), `rows_partitions` the distinct tuples pyiceberg's own
transforms give the file's rows (read with pyarrow), and `planned` how many files
`scan(row_filter=--filter).plan_files()` keeps (pruned by the partition values).
Exit 1 with {"error": "..."} on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
from common import add_catalog_args, dumps, load_table_from_args  # noqa: E402
from pyiceberg.types import DateType, TimestampType, TimestamptzType  # noqa: E402


def python_values(column: pa.ChunkedArray, iceberg_type) -> list:
    """A column as the Python values pyiceberg's transforms take (micros, days, Decimal, str, int)."""
    if isinstance(iceberg_type, (TimestampType, TimestamptzType)):
        return column.cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
    if isinstance(iceberg_type, DateType):
        return column.cast(pa.int32()).to_pylist()
    return column.to_pylist()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_catalog_args(p)
    p.add_argument("--table", help="namespace.table (not for --catalog static)")
    p.add_argument("--filter", help="a row filter in pyiceberg's expression syntax")
    a = p.parse_args()
    try:
        table = load_table_from_args(a, a.table)
        spec = table.spec()
        schema = table.schema()
        fields = [(f, schema.find_field(f.source_id)) for f in spec.fields]
        tasks = list(table.scan().plan_files())
        files = []
        for t in tasks:
            path = urlparse(t.file.file_path).path
            data = pq.read_table(path, columns=[src.name for _, src in fields])
            fns = [f.transform.transform(src.field_type) for f, src in fields]
            values = [python_values(data.column(src.name), src.field_type) for _, src in fields]
            tuples = sorted(
                {tuple(fn(v[i]) for fn, v in zip(fns, values)) for i in range(data.num_rows)}, key=repr
            )
            files.append(
                {
                    "path": t.file.file_path,
                    "records": t.file.record_count,
                    "partition": {f.name: t.file.partition[i] for i, (f, _) in enumerate(fields)},
                    "rows_partitions": [{f.name: v for (f, _), v in zip(fields, tup)} for tup in tuples],
                }
            )
        planned = len(list(table.scan(row_filter=a.filter).plan_files())) if a.filter else len(tasks)
    except Exception as e:  # noqa: BLE001 - the test wants the message
        sys.stderr.write(dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    out = {
        "spec": [{"name": f.name, "source": src.name, "transform": str(f.transform)} for f, src in fields],
        "files": files,
        "planned": planned,
    }
    sys.stdout.write(dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
