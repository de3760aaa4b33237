"""Loads one Iceberg table with pyiceberg's StaticTable (no catalog) and prints what pyiceberg made
of its metadata as one JSON object on stdout: for the `file` catalog's tests, which check that an
independent reader accepts the metadata tidemark writes (its validation runs on load).

  .venv-readers/bin/python test/readers/inspect_metadata.py <metadata.json path | table folder> [--scan]

A table folder is read through metadata/version-hint.text, as pyiceberg does. --scan also plans
and reads the rows (the table must have no snapshot, or real manifests). Snapshot ids are printed
as strings, so 63-bit ids compare exactly. Exit 1 with {"error": "..."} on stderr.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    scan = "--scan" in sys.argv
    try:
        from pyiceberg.table import StaticTable

        table = StaticTable.from_metadata(args[0])
        m = table.metadata
        schema = table.schema()
        out = {
            "metadata_location": table.metadata_location,
            "format_version": m.format_version,
            "table_uuid": str(m.table_uuid),
            "location": m.location,
            "last_column_id": m.last_column_id,
            "last_sequence_number": m.last_sequence_number,
            "schema_id": schema.schema_id,
            "schema": [
                {"id": f.field_id, "name": f.name, "type": str(f.field_type), "required": f.required}
                for f in schema.fields
            ],
            "identifier_field_ids": sorted(schema.identifier_field_ids),
            "spec_fields": len(table.spec().fields),
            "sort_order_fields": len(table.sort_order().fields),
            "properties": dict(m.properties),
            "current_snapshot_id": None if m.current_snapshot_id is None else str(m.current_snapshot_id),
            "snapshots": [
                {
                    "id": str(s.snapshot_id),
                    "parent": None if s.parent_snapshot_id is None else str(s.parent_snapshot_id),
                    "sequence_number": s.sequence_number,
                    "manifest_list": s.manifest_list,
                    "summary": s.summary.model_dump() if s.summary else None,
                }
                for s in m.snapshots
            ],
            "refs": {name: str(ref.snapshot_id) for name, ref in m.refs.items()},
            "snapshot_log": [str(e.snapshot_id) for e in m.snapshot_log],
            "metadata_log": [e.metadata_file for e in m.metadata_log],
        }
        if scan:
            out["rows"] = table.scan().to_arrow().num_rows
    except Exception as e:  # noqa: BLE001 - the test wants the message
        sys.stderr.write(json.dumps({"error": f"{type(e).__name__}: {e}"}) + "\n")
        return 1
    sys.stdout.write(json.dumps(out, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
