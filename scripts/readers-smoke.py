#!/usr/bin/env python3
"""Smoke test of the independent lake readers (issue 30); not part of the test suite yet.

Run from the repo root after scripts/install-test-readers.sh:
    .venv-readers/bin/python scripts/readers-smoke.py [--keep] [--skip-spark]

 a) pyiceberg, SQL catalog (sqlite) on a local file warehouse: creates two v2 tables, a change
    log (appends: insert, then update and delete as new row versions) and a current-state table
    (pyiceberg upsert and delete: copy-on-write, no equality or position deletes), reads both
    back through test/readers/read_table.py, also as a StaticTable from the metadata file.
 b) Spark 3.5 local[1] with the Iceberg runtime (test/readers/spark_reader.py): reads the same
    tables through Iceberg's JDBC catalog over the same sqlite file, and by metadata file path.
 c) moto_server on a free 127.0.0.1 port: pyiceberg's Glue catalog creates a namespace and a
    table whose files live in moto's S3, appends, reads back; then Spark reads it through
    Iceberg's GlueCatalog + S3FileIO (iceberg-aws-bundle) and through hadoop-aws (S3A).

Every value read by each reader is compared with what was written. Everything started here is
stopped by pid at the end. Prints timings per step and a JSON summary as the last line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
READERS = os.path.join(ROOT, "test", "readers")
VENV_PY = os.path.join(ROOT, ".venv-readers", "bin", "python")
sys.path.insert(0, READERS)

if os.path.realpath(sys.prefix) != os.path.realpath(os.path.join(ROOT, ".venv-readers")) and os.path.exists(VENV_PY):
    os.execv(VENV_PY, [VENV_PY, *sys.argv])

from common import to_json_value  # noqa: E402

STARTED: list[subprocess.Popen] = []
SUMMARY: dict = {"steps": {}, "failures": []}
T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", flush=True)


class Step:
    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.t = time.perf_counter()
        log(f"--- {self.name}")
        return self

    def __exit__(self, et, ev, tb):
        ms = round((time.perf_counter() - self.t) * 1000)
        ok = et is None
        SUMMARY["steps"][self.name] = {"ok": ok, "ms": ms}
        if not ok:
            SUMMARY["failures"].append({"step": self.name, "error": f"{et.__name__}: {ev}"})
            log(f"FAILED {self.name} after {ms} ms: {et.__name__}: {ev}")
        else:
            log(f"ok {self.name}: {ms} ms")
        return True  # go on with the next step


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd, env=None, **kw) -> subprocess.Popen:
    p = subprocess.Popen(cmd, env=env, start_new_session=True, **kw)
    STARTED.append(p)
    log(f"started pid {p.pid}: {' '.join(cmd[:3])} ...")
    return p


def stop(p: subprocess.Popen, timeout=10.0) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    log(f"stopped pid {p.pid} (exit {p.returncode})")


def peak_rss_mb(pid: int):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        return None


def run_json(cmd, env=None) -> dict:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    ms = round((time.perf_counter() - t) * 1000)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:3])} exit {r.returncode}: {r.stderr.strip()[-1500:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["process_ms"] = ms
    return out


# ---- the data -----------------------------------------------------------------------------

def schema():
    from pyiceberg.schema import Schema
    from pyiceberg.types import (DecimalType, ListType, LongType, NestedField, StringType,
                                 TimestamptzType, UUIDType)

    return Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "name", StringType()),
        NestedField(3, "big_unsigned", DecimalType(20, 0)),
        NestedField(4, "price", DecimalType(38, 9)),
        NestedField(5, "updated_at", TimestamptzType()),
        NestedField(6, "tags", ListType(7, StringType(), element_required=False)),
        NestedField(8, "ref", UUIDType()),
        NestedField(9, "__op", StringType(), required=True),
        NestedField(10, "__pos", LongType(), required=True),
        identifier_field_ids=[],
    )


UTC = dt.timezone.utc
U1 = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e")


def dec(v):
    return None if v is None else decimal.Decimal(v)


def row(i, name, big, price, ts, tags, ref, op, pos):
    return {"id": i, "name": name, "big_unsigned": dec(big), "price": dec(price),
            "updated_at": ts, "tags": tags, "ref": ref, "__op": op, "__pos": pos}


BATCH1 = [
    row(1, "ada", "18446744073709551615", "12345678901234567890.123456789",
        dt.datetime(2024, 2, 29, 23, 59, 59, 999999, UTC), ["a", None, "ü"], U1, "i", 1),
    row(2, "bob", "0", "-0.000000001", dt.datetime(1969, 12, 31, 23, 59, 59, 1, UTC), [], None, "i", 2),
    row(3, None, None, None, None, None, None, "i", 3),
]
BATCH2 = [  # a change log: the update and the delete are new row versions, appended
    row(2, "bobby", "1", "0.500000000", dt.datetime(2024, 3, 1, 0, 0, 0, 123456, UTC), ["x"], None, "u", 4),
    row(3, None, None, None, None, None, None, "d", 5),
]


def arrow_table(rows, iceberg_schema):
    import pyarrow as pa
    from pyiceberg.io.pyarrow import schema_to_pyarrow

    pa_schema = schema_to_pyarrow(iceberg_schema, include_field_ids=False)
    cols = {}
    for f in pa_schema:
        vals = [r[f.name] for r in rows]
        if f.name == "ref":
            vals = [v.bytes if v is not None else None for v in vals]
        cols[f.name] = vals
    return pa.Table.from_pydict(cols, schema=pa_schema)


def norm(rows):
    """JSON-comparable rows: ISO timestamps without the UTC suffix (Spark's are naive UTC)."""
    out = []
    for r in rows:
        j = to_json_value(r)
        for k, v in list(j.items()):
            if isinstance(v, str) and k == "updated_at":
                j[k] = v.replace("+00:00", "")
            if k == "ref" and isinstance(v, str) and len(v) == 32:  # pyarrow uuid as 16 bytes hex
                j[k] = str(uuid.UUID(hex=v))
        out.append(j)
    return sorted(out, key=lambda j: (j["id"], j["__pos"]))


def expect(label, got, want):
    g, w = norm(got), norm(want)
    if g != w:
        raise AssertionError(f"{label}: rows differ\n got: {json.dumps(g)}\nwant: {json.dumps(w)}")
    log(f"{label}: {len(g)} rows as written")


# ---- steps ---------------------------------------------------------------------------------

def step_a(work, out):
    from pyiceberg.catalog.sql import SqlCatalog

    t = time.perf_counter()
    wh = os.path.join(work, "warehouse")
    os.makedirs(wh)
    db = os.path.join(work, "catalog.db")
    cat = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{wh}")
    cat.create_namespace("smoke")
    sch = schema()
    log(f"pyiceberg import + catalog: {round((time.perf_counter() - t) * 1000)} ms")

    t = time.perf_counter()
    changes = cat.create_table("smoke.changes", schema=sch, properties={"format-version": "2"})
    changes.append(arrow_table(BATCH1, sch))
    changes.append(arrow_table(BATCH2, sch))
    log(f"change log: create + 2 appends {round((time.perf_counter() - t) * 1000)} ms")

    t = time.perf_counter()
    from pyiceberg.expressions import EqualTo

    cur = cat.create_table("smoke.current", schema=sch, properties={"format-version": "2"})
    cur.append(arrow_table(BATCH1, sch))
    res = cur.upsert(arrow_table([BATCH2[0], row(4, "dan", "7", "7.250000000", None, ["d"], U1, "i", 6)], sch),
                     join_cols=["id"])
    cur.delete(EqualTo("id", 3))
    log(f"current state: create + append + upsert ({res.rows_updated} updated, {res.rows_inserted} inserted)"
        f" + delete {round((time.perf_counter() - t) * 1000)} ms")
    cur = cat.load_table("smoke.current")
    kinds = {}
    for task in cur.scan().plan_files():
        kinds["data"] = kinds.get("data", 0) + 1
        for d in task.delete_files:
            kinds[str(d.content)] = kinds.get(str(d.content), 0) + 1
    log(f"current state: files scanned {kinds}, format-version {cur.metadata.format_version}, "
        f"snapshots {[s.summary.operation.value for s in cur.snapshots()]}")
    want_current = [BATCH2[0], row(1, *list(BATCH1[0].values())[1:]), row(4, "dan", "7", "7.250000000", None, ["d"], U1, "i", 6)]
    out["want"] = {"smoke.changes": BATCH1 + BATCH2, "smoke.current": want_current}
    out["sql"] = {"db": db, "wh": wh, "changes_meta": cat.load_table("smoke.changes").metadata_location,
                  "current_meta": cur.metadata_location}

    for name in ("smoke.changes", "smoke.current"):
        r = run_json([sys.executable, os.path.join(READERS, "read_table.py"), "--catalog", "sql",
                      "--uri", f"sqlite:///{db}", "--warehouse", f"file://{wh}", "--table", name])
        log(f"read_table.py {name}: process {r['process_ms']} ms (load {r['ms']['load']}, scan {r['ms']['scan']})")
        expect(f"pyiceberg sql {name}", r["rows"], out["want"][name])
    r = run_json([sys.executable, os.path.join(READERS, "read_table.py"), "--catalog", "static",
                  "--metadata", out["sql"]["current_meta"]])
    expect("pyiceberg StaticTable smoke.current", r["rows"], want_current)
    out["schema_seen_by_pyiceberg"] = r["schema"]


class Spark:
    def __init__(self, args, env):
        t = time.perf_counter()
        self.log_path = env["SPARK_LOG"]
        self.p = start([sys.executable, os.path.join(READERS, "spark_reader.py"), *args], env=env,
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(env["SPARK_LOG"], "w"),
                       text=True)
        ready = self.read()
        if not ready.get("ready"):
            raise RuntimeError(f"spark_reader did not start: {ready}")
        self.ready = ready
        self.wall_ms = round((time.perf_counter() - t) * 1000)
        log(f"Spark {ready['spark']} ready: {self.wall_ms} ms from spawn ({ready['start_ms']} ms in-process), "
            f"JVM pid {ready['jvm_pid']}")

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            err = open(self.log_path).read()[-2000:]
            raise RuntimeError(f"spark_reader exited ({self.p.poll()}): {err}")
        return json.loads(line)

    def ask(self, req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        return self.read()

    def close(self):
        try:
            self.p.stdin.write('{"quit": true}\n')
            self.p.stdin.flush()
            bye = self.read()
            self.p.wait(30)
            return bye
        finally:
            stop(self.p)


def spark_env(work, extra=None):
    env = dict(os.environ, TZ="UTC", SPARK_LOG=os.path.join(work, f"spark-{len(STARTED)}.log"))
    env.update(extra or {})
    return env


def step_b(work, out):
    sql = out["sql"]
    sp = Spark(["--jdbc", f"lake=jdbc:sqlite:{sql['db']}", "--warehouse", f"lake=file://{sql['wh']}"],
               spark_env(work))
    out["spark_local"] = {"start_wall_ms": sp.wall_ms, "start_ms": sp.ready["start_ms"]}
    try:
        for name in ("smoke.changes", "smoke.current"):
            r = sp.ask({"table": f"lake.{name}"})
            if not r["ok"]:
                raise RuntimeError(f"Spark JDBC catalog lake.{name}: {r['error']}")
            log(f"Spark JDBC catalog lake.{name}: {r['ms']} ms")
            expect(f"Spark jdbc {name}", r["rows"], out["want"][name])
            out["spark_local"][f"read {name} ms"] = r["ms"]
        r = sp.ask({"load": sql["current_meta"]})
        if not r["ok"]:
            raise RuntimeError(f"Spark load(metadata.json): {r['error']}")
        log(f"Spark load(metadata file) smoke.current: {r['ms']} ms")
        expect("Spark path smoke.current", r["rows"], out["want"]["smoke.current"])
        r = sp.ask({"sql": "SELECT snapshot_id, operation FROM lake.smoke.current.snapshots ORDER BY committed_at"})
        log(f"Spark snapshots of lake.smoke.current: {[x['operation'] for x in r.get('rows', [])]}")
        # Spark writes position deletes (merge-on-read, v2): can pyiceberg read them?
        t = time.perf_counter()
        for q in ["CREATE TABLE lake.smoke.spark_mor (id bigint, v string) USING iceberg TBLPROPERTIES "
                  "('format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
                  "INSERT INTO lake.smoke.spark_mor VALUES (1, 'a'), (2, 'b'), (3, 'c')",
                  "DELETE FROM lake.smoke.spark_mor WHERE id = 2",
                  "UPDATE lake.smoke.spark_mor SET v = 'c2' WHERE id = 3"]:
            r = sp.ask({"sql": q})
            if not r["ok"]:
                raise RuntimeError(f"Spark {q[:40]}: {r['error']}")
        r = sp.ask({"sql": "SELECT content, file_format, record_count FROM lake.smoke.spark_mor.delete_files"})
        log(f"Spark wrote lake.smoke.spark_mor with deletes {r.get('rows')} in {round((time.perf_counter() - t) * 1000)} ms")
        r = run_json([sys.executable, os.path.join(READERS, "read_table.py"), "--catalog", "sql", "--uri",
                      f"sqlite:///{sql['db']}", "--warehouse", f"file://{sql['wh']}", "--table", "smoke.spark_mor",
                      "--order-by", "id"])
        got = [(x["id"], x["v"]) for x in r["rows"]]
        if got != [(1, "a"), (3, "c2")]:
            raise AssertionError(f"pyiceberg read of Spark's position deletes: {got}")
        log(f"pyiceberg reads Spark's position deletes: {got}")
        r = sp.ask({"sql": "DESCRIBE TABLE lake.smoke.changes"})
        out["schema_seen_by_spark"] = {x["col_name"]: x["data_type"] for x in r.get("rows", []) if x["col_name"] and not x["col_name"].startswith("#")}
        log(f"Spark types: {out['schema_seen_by_spark']}")
    finally:
        bye = sp.close()
        out["spark_local"]["jvm_peak_rss_mb"] = bye.get("jvm_peak_rss_mb")
        log(f"Spark stopped: JVM peak RSS {bye.get('jvm_peak_rss_mb')} MB, stop {bye.get('stop_ms')} ms")


def step_c(work, out, skip_spark):
    import boto3

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    aws_env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": url, "AWS_EC2_METADATA_DISABLED": "true"}
    for k in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        os.environ.pop(k, None)
    os.environ.update(aws_env)
    t = time.perf_counter()
    moto = start([os.path.join(os.path.dirname(sys.executable), "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                 env=dict(os.environ), stdout=open(os.path.join(work, "moto.log"), "w"), stderr=subprocess.STDOUT)
    while True:
        try:
            urllib.request.urlopen(f"{url}/moto-api/data.json", timeout=1).read()
            break
        except OSError:
            if moto.poll() is not None or time.perf_counter() - t > 30:
                raise RuntimeError(f"moto_server did not start: {open(os.path.join(work, 'moto.log')).read()[-800:]}")
            time.sleep(0.1)
    out["moto"] = {"port": port, "start_ms": round((time.perf_counter() - t) * 1000)}
    log(f"moto_server ready on {url}: {out['moto']['start_ms']} ms")
    try:
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket="lake")
        from pyiceberg.catalog.glue import GlueCatalog

        t = time.perf_counter()
        props = {"glue.endpoint": url, "glue.region": "us-east-1", "glue.access-key-id": "testing",
                 "glue.secret-access-key": "testing", "s3.endpoint": url, "s3.region": "us-east-1",
                 "s3.access-key-id": "testing", "s3.secret-access-key": "testing", "warehouse": "s3://lake/wh"}
        cat = GlueCatalog("glue", **props)
        cat.create_namespace("tidemark_smoke")
        sch = schema()
        tbl = cat.create_table("tidemark_smoke.events", schema=sch)
        tbl.append(arrow_table(BATCH1, sch))
        tbl.append(arrow_table(BATCH2, sch))
        log(f"pyiceberg Glue catalog on moto: namespace + table + 2 appends {round((time.perf_counter() - t) * 1000)} ms")
        glue = boto3.client("glue", endpoint_url=url)
        g = glue.get_table(DatabaseName="tidemark_smoke", Name="events")["Table"]
        log(f"Glue table: Parameters {g.get('Parameters')}, VersionId {g.get('VersionId')}")
        keys = [o["Key"] for o in boto3.client("s3", endpoint_url=url).list_objects_v2(Bucket="lake")["Contents"]]
        log(f"moto S3 objects: {len(keys)} ({sum(k.endswith('.parquet') for k in keys)} parquet, "
            f"{sum(k.endswith('.metadata.json') for k in keys)} metadata.json, {sum(k.endswith('.avro') for k in keys)} avro)")
        out["glue"] = {"metadata": g["Parameters"]["metadata_location"]}

        r = run_json([sys.executable, os.path.join(READERS, "read_table.py"), "--catalog", "glue",
                      "--glue-endpoint", url, "--s3-endpoint", url, "--access-key-id", "testing",
                      "--secret-access-key", "testing", "--table", "tidemark_smoke.events"], env=dict(os.environ))
        log(f"read_table.py glue: process {r['process_ms']} ms (load {r['ms']['load']}, scan {r['ms']['scan']})")
        expect("pyiceberg glue tidemark_smoke.events", r["rows"], BATCH1 + BATCH2)

        moto_leniency(url, out)
        if skip_spark:
            return
        sp = Spark(["--glue", "g", "--warehouse", "g=s3://lake/wh", "--glue-endpoint", url, "--s3-endpoint", url],
                   spark_env(work, aws_env))
        out["spark_glue"] = {"start_wall_ms": sp.wall_ms, "start_ms": sp.ready["start_ms"]}
        try:
            r = sp.ask({"table": "g.tidemark_smoke.events"})
            if r["ok"]:
                log(f"Spark GlueCatalog + S3FileIO g.tidemark_smoke.events: {r['ms']} ms")
                expect("Spark glue tidemark_smoke.events", r["rows"], BATCH1 + BATCH2)
                out["spark_glue"]["glue_read_ms"] = r["ms"]
            else:
                SUMMARY["failures"].append({"step": "c spark glue", "error": r["error"]})
                log(f"Spark through Glue FAILED: {r['error']}")
            r = sp.ask({"load": out["glue"]["metadata"]})
            if r["ok"]:
                log(f"Spark load(s3 metadata file) through hadoop-aws S3A: {r['ms']} ms")
                expect("Spark s3a path tidemark_smoke.events", r["rows"], BATCH1 + BATCH2)
                out["spark_glue"]["s3a_read_ms"] = r["ms"]
            else:
                SUMMARY["failures"].append({"step": "c spark s3a", "error": r["error"]})
                log(f"Spark through S3A FAILED: {r['error']}")
        finally:
            bye = sp.close()
            out["spark_glue"]["jvm_peak_rss_mb"] = bye.get("jvm_peak_rss_mb")
            log(f"Spark stopped: JVM peak RSS {bye.get('jvm_peak_rss_mb')} MB")
    finally:
        out["moto"]["peak_rss_mb"] = peak_rss_mb(moto.pid)
        stop(moto)


def moto_leniency(url, out):
    """Facts the harness shim of issue 30 needs: which conditions moto enforces (not failures)."""
    import boto3
    import botocore

    glue = boto3.client("glue", endpoint_url=url)
    glue.create_database(DatabaseInput={"Name": "leniency"})
    glue.create_table(DatabaseName="leniency", TableInput={"Name": "t", "Parameters": {"metadata_location": "m0"}})
    v = glue.get_table(DatabaseName="leniency", Name="t")["Table"]["VersionId"]
    glue.update_table(DatabaseName="leniency", TableInput={"Name": "t", "Parameters": {"metadata_location": "m1"}},
                      VersionId=v, SkipArchive=True)
    facts = {}
    try:
        glue.update_table(DatabaseName="leniency", TableInput={"Name": "t", "Parameters": {"metadata_location": "m2"}},
                          VersionId=v, SkipArchive=True)
        facts["glue_update_table_stale_version_id"] = "accepted (moto ignores VersionId)"
    except botocore.exceptions.ClientError as e:
        facts["glue_update_table_stale_version_id"] = f"refused: {e.response['Error']['Code']}"
    n = len(glue.get_table_versions(DatabaseName="leniency", TableName="t")["TableVersions"])
    facts["glue_versions_after_create_and_2_skip_archive_updates"] = n
    s3 = boto3.client("s3", endpoint_url=url)
    s3.put_object(Bucket="lake", Key="leniency/k", Body=b"1")
    for label, kw in [("s3_put_if_none_match_star_on_existing", {"IfNoneMatch": "*"}),
                      ("s3_put_if_match_wrong_etag", {"IfMatch": '"0123456789abcdef0123456789abcdef"'})]:
        try:
            s3.put_object(Bucket="lake", Key="leniency/k", Body=b"2", **kw)
            facts[label] = "accepted"
        except botocore.exceptions.ClientError as e:
            facts[label] = f"refused: {e.response['Error']['Code']} {e.response['ResponseMetadata']['HTTPStatusCode']}"
    out["moto_leniency"] = facts
    log(f"moto leniency: {facts}")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--keep", action="store_true", help="keep the temp dir (printed)")
    p.add_argument("--skip-spark", action="store_true")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="tidemark-readers-")
    log(f"work dir {work}; python {sys.version.split()[0]} in {sys.prefix}")
    out: dict = {}
    try:
        with Step("a pyiceberg sql catalog"):
            step_a(work, out)
        if not a.skip_spark and "sql" in out:
            with Step("b spark local"):
                step_b(work, out)
        with Step("c moto glue + s3"):
            step_c(work, out, a.skip_spark)
    finally:
        for proc in STARTED:
            if proc.poll() is None:
                stop(proc)
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    SUMMARY["total_ms"] = round((time.perf_counter() - T0) * 1000)
    SUMMARY["peak_rss_mb"] = {
        "smoke_process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "largest_child_process": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024),
        "spark_jvm_local": out.get("spark_local", {}).get("jvm_peak_rss_mb"),
        "spark_jvm_glue": out.get("spark_glue", {}).get("jvm_peak_rss_mb"),
        "moto_server": out.get("moto", {}).get("peak_rss_mb"),
    }
    SUMMARY["detail"] = {k: v for k, v in out.items() if k not in ("want",)}
    print(json.dumps(to_json_value(SUMMARY)), flush=True)
    return 1 if SUMMARY["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
