"""Prints what pyiceberg reads from one Iceberg table's metadata tree as one JSON object on stdout.

  .venv-readers/bin/python test/readers/iceberg_metadata.py --catalog static \
      --metadata file:///tmp/x/t/metadata/v3.metadata.json

Output: {"snapshot_id", "manifests": [manifest list entries], "entries": inspect.entries(),
"files": inspect.files()}, values in common.py's JSON (maps as [[key, value], ...], bounds of
readable_metrics decoded by pyiceberg into the column's type). The TypeScript side checks that
pyiceberg sees the manifest lists, manifests and metrics tidemark wrote (issue 30).
Exit 1 with {"error": "..."} on stderr.
"""

from __future__ import annotations

import argparse
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
from common import add_catalog_args, dumps, load_table_from_args  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_catalog_args(p)
    p.add_argument("--table", help="namespace.table (not for --catalog static)")
    a = p.parse_args()
    try:
        table = load_table_from_args(a, a.table)
        snap = table.current_snapshot()
        manifests = [
            {
                "manifest_path": m.manifest_path,
                "manifest_length": m.manifest_length,
                "partition_spec_id": m.partition_spec_id,
                "content": int(m.content),
                "sequence_number": m.sequence_number,
                "min_sequence_number": m.min_sequence_number,
                "added_snapshot_id": m.added_snapshot_id,
                "added_files_count": m.added_files_count,
                "existing_files_count": m.existing_files_count,
                "deleted_files_count": m.deleted_files_count,
                "added_rows_count": m.added_rows_count,
                "existing_rows_count": m.existing_rows_count,
                "deleted_rows_count": m.deleted_rows_count,
                "partitions": [
                    {"contains_null": s.contains_null, "contains_nan": s.contains_nan,
                     "lower_bound": s.lower_bound, "upper_bound": s.upper_bound}
                    for s in (m.partitions or [])
                ],
            }
            for m in (snap.manifests(table.io) if snap else [])
        ]
        entries = table.inspect.entries().to_pylist()
        files = table.inspect.files().to_pylist()
    except Exception as e:  # noqa: BLE001 - the test wants the message
        sys.stderr.write(dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    out = {
        "snapshot_id": snap.snapshot_id if snap else None,
        "manifests": manifests,
        "entries": entries,
        "files": files,
    }
    sys.stdout.write(dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
