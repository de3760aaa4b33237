"""Lists the data files of an Iceberg table's current snapshot, as pyiceberg plans its scan.

  .venv-readers/bin/python test/readers/table_files.py --catalog static \
      --metadata file:///tmp/x/lake/public.t/metadata/v7.metadata.json

Output: {"snapshot_id", "files": [{"path", "records", "size", "deletes"}], "deletes": [path],
"missing": [path]} where a file's `deletes` counts the delete files the scan applies to it, the
top-level `deletes` lists those delete files (each once), and `missing` lists the planned files
that do not exist (a file a snapshot references was deleted).
Exit 1 with {"error": "..."} on stderr.
"""

from __future__ import annotations

import argparse
import os
import sys
from urllib.parse import urlparse

sys.path.insert(0, os.path.dirname(__file__))
from common import add_catalog_args, dumps, load_table_from_args  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_catalog_args(p)
    p.add_argument("--table", help="namespace.table (not for --catalog static)")
    a = p.parse_args()
    try:
        table = load_table_from_args(a, a.table)
        snap = table.current_snapshot()
        tasks = list(table.scan().plan_files()) if snap else []
    except Exception as e:  # noqa: BLE001 - the test wants the message
        sys.stderr.write(dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    files = [
        {
            "path": t.file.file_path,
            "records": t.file.record_count,
            "size": t.file.file_size_in_bytes,
            "deletes": len(t.delete_files),
        }
        for t in tasks
    ]
    # Position delete files the scan applies (a current-state table's), each once.
    deletes = sorted({d.file_path for t in tasks for d in (t.delete_files or ())})
    missing = [
        f["path"] for f in files if f["path"].startswith("file:") and not os.path.exists(urlparse(f["path"]).path)
    ]
    sys.stdout.write(
        dumps({"snapshot_id": snap.snapshot_id if snap else None, "files": files, "deletes": deletes, "missing": missing})
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
