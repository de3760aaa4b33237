"""Reads one Iceberg table with pyiceberg and prints it as one JSON object on stdout.

  .venv-readers/bin/python test/readers/read_table.py --catalog sql \
      --uri sqlite:////tmp/x/catalog.db --warehouse file:///tmp/x/wh --table ns.t [--order-by id]
  .venv-readers/bin/python test/readers/read_table.py --catalog glue \
      --glue-endpoint http://127.0.0.1:PORT --s3-endpoint http://127.0.0.1:PORT \
      --access-key-id testing --secret-access-key testing --table db.t
  .venv-readers/bin/python test/readers/read_table.py --catalog rest \
      --uri http://127.0.0.1:PORT [--token T] --table ns.t
  .venv-readers/bin/python test/readers/read_table.py --catalog static \
      --metadata file:///tmp/x/wh/ns.db/t/metadata/00002-....metadata.json

Output: {"table", "format_version", "snapshot_id", "schema": [{"id","name","type","required"}],
"rows": [{column: value}], "ms": {"load", "scan"}}. Exit 1 with {"error": "..."} on stderr.
"""

from __future__ import annotations

import argparse
import sys
import time

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import add_catalog_args, dumps, load_table_from_args  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_catalog_args(p)
    p.add_argument("--table", help="namespace.table (not for --catalog static)")
    p.add_argument("--snapshot-id", type=int, help="read this snapshot instead of the current one")
    p.add_argument("--order-by", help="comma-separated columns to sort the rows by")
    a = p.parse_args()
    t0 = time.perf_counter()
    try:
        table = load_table_from_args(a, a.table)
        t1 = time.perf_counter()
        scan = table.scan(snapshot_id=a.snapshot_id) if a.snapshot_id else table.scan()
        arrow = scan.to_arrow()
        if a.order_by:
            arrow = arrow.sort_by([(c, "ascending") for c in a.order_by.split(",")])
        rows = arrow.to_pylist()
        t2 = time.perf_counter()
    except Exception as e:  # noqa: BLE001 - the test wants the message
        sys.stderr.write(dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    snap = table.current_snapshot()
    out = {
        "table": a.table,
        "format_version": table.metadata.format_version,
        "snapshot_id": a.snapshot_id or (snap.snapshot_id if snap else None),
        "schema": [
            {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
            for f in table.schema().fields
        ],
        "rows": rows,
        "ms": {"load": round((t1 - t0) * 1000, 1), "scan": round((t2 - t1) * 1000, 1)},
    }
    sys.stdout.write(dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
