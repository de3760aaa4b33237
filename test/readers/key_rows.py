"""Every live row of an Iceberg table's current snapshot with its key: the expected side of
test/integration/iceberg-key-lookup.test.ts (shared/iceberg/key-lookup.ts).

  .venv-readers/bin/python test/readers/key_rows.py --catalog static \
      --metadata file:///tmp/x/lake/public.t/metadata/v7.metadata.json --key id --key name

pyiceberg plans the scan (its own manifest reading: which data files are live, which position
delete files apply to each); each data file is read whole with pyarrow and its rows enumerated
(0-based position in the file); a row is live unless one of its planned position delete files
lists (file_path, pos). Key columns are found by Iceberg field id (Parquet `PARQUET:field_id`).

Output: {"rows": [{"file_path", "pos", "key": [values]}]}, values as common.to_json_value prints
them (decimals fixed-point with the column's scale). Exit 1 with {"error": "..."} on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(__file__))
from common import add_catalog_args, dumps, load_table_from_args  # noqa: E402

import pyarrow.parquet as pq  # noqa: E402


def local(uri: str) -> str:
    return urlparse(uri).path if uri.startswith("file:") else uri


def column_by_id(table, field_id: int):
    for i, f in enumerate(table.schema):
        if f.metadata and f.metadata.get(b"PARQUET:field_id") == str(field_id).encode():
            return table.column(i)
    raise KeyError(f"no column with field id {field_id}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_catalog_args(p)
    p.add_argument("--table", help="namespace.table (not for --catalog static)")
    p.add_argument("--key", action="append", required=True, help="a key column (repeat for a composite key)")
    a = p.parse_args()
    try:
        table = load_table_from_args(a, a.table)
        schema = table.schema()
        ids = [schema.find_field(k).field_id for k in a.key]
        tasks = list(table.scan().plan_files()) if table.current_snapshot() else []
        out = []
        for t in tasks:
            deleted = set()
            for d in t.delete_files:
                dt = pq.read_table(local(d.file_path))
                for path, pos in zip(dt.column("file_path").to_pylist(), dt.column("pos").to_pylist()):
                    if path == t.file.file_path:
                        deleted.add(pos)
            data = pq.read_table(local(t.file.file_path))
            cols = [column_by_id(data, i).to_pylist() for i in ids]
            for pos in range(data.num_rows):
                if pos not in deleted:
                    out.append({"file_path": t.file.file_path, "pos": pos, "key": [c[pos] for c in cols]})
    except Exception as e:  # noqa: BLE001 - the test wants the message
        sys.stderr.write(dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    sys.stdout.write(dumps({"rows": out}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
