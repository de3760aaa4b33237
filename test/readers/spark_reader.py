"""Spark 3.5 (local mode, Iceberg runtime) as a reader of the lake, for tests only.

Starting Spark is the expensive part (a JVM, seconds), so one process serves many reads: it
starts a session, prints one JSON line {"ready": true, ...}, then answers each JSON request
line on stdin with one JSON line on stdout, until EOF or {"quit": true}, when it prints
{"bye": true, "jvm_peak_rss_mb": ...} and stops the session. Logs go to stderr.

Requests:
  {"table": "lake.ns.t", "order_by": "id"}        read a table through a configured catalog
  {"load": "file:///.../00002-x.metadata.json"}   read one metadata file (no catalog)
  {"sql": "SELECT ... "}                          any Spark SQL
Answers: {"ok": true, "rows": [{...}], "columns": [...], "ms": n} or {"ok": false, "error": "..."}

  .venv-readers/bin/python test/readers/spark_reader.py \
      --jdbc lake=jdbc:sqlite:/tmp/x/catalog.db --warehouse lake=file:///tmp/x/wh \
      --glue g --glue-endpoint http://127.0.0.1:PORT --s3-endpoint http://127.0.0.1:PORT

Needs the jars of scripts/install-test-readers.sh (.readers/jars/) and Java 17 (JAVA_HOME or
/usr/lib/jvm/java-17-openjdk-amd64). Binds to 127.0.0.1 only; the Spark UI is off.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import dumps  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
JAVA17 = "/usr/lib/jvm/java-17-openjdk-amd64"


def emit(obj) -> None:
    sys.stdout.write(dumps(obj) + "\n")
    sys.stdout.flush()


def build_session(a):
    os.environ.setdefault("JAVA_HOME", JAVA17 if os.path.isdir(JAVA17) else "")
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = sorted(glob.glob(os.path.join(a.jars, "*.jar")))
    if not jars:
        raise SystemExit(f"no jars in {a.jars}: run scripts/install-test-readers.sh")
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master("local[1]")
        .appName("tidemark-test-reader")
        .config("spark.driver.memory", a.driver_memory)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.default.parallelism", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.driver.extraJavaOptions", "-Djava.net.preferIPv4Stack=true -XX:+UseSerialGC")
    )
    warehouses = dict(kv.split("=", 1) for kv in a.warehouse)
    for spec in a.jdbc:
        name, uri = spec.split("=", 1)
        c = f"spark.sql.catalog.{name}"
        b = (b.config(c, "org.apache.iceberg.spark.SparkCatalog").config(f"{c}.type", "jdbc")
             .config(f"{c}.uri", uri).config(f"{c}.warehouse", warehouses.get(name, ""))
             # pyiceberg 0.12's SQL catalog writes the V1 layout (iceberg_tables.iceberg_type)
             .config(f"{c}.jdbc.schema-version", "V1"))
    for spec in a.hadoop:
        name, wh = spec.split("=", 1)
        c = f"spark.sql.catalog.{name}"
        b = b.config(c, "org.apache.iceberg.spark.SparkCatalog").config(f"{c}.type", "hadoop").config(f"{c}.warehouse", wh)
    for name in a.glue:
        c = f"spark.sql.catalog.{name}"
        b = (b.config(c, "org.apache.iceberg.spark.SparkCatalog")
             .config(f"{c}.catalog-impl", "org.apache.iceberg.aws.glue.GlueCatalog")
             .config(f"{c}.io-impl", "org.apache.iceberg.aws.s3.S3FileIO")
             .config(f"{c}.client.region", a.region))
        if name in warehouses:
            b = b.config(f"{c}.warehouse", warehouses[name])
        if a.glue_endpoint:
            b = b.config(f"{c}.glue.endpoint", a.glue_endpoint)
        if a.s3_endpoint:
            b = b.config(f"{c}.s3.endpoint", a.s3_endpoint).config(f"{c}.s3.path-style-access", "true")
    if a.s3_endpoint:
        # Plain s3:// / s3a:// paths (a metadata file read by --load) go through hadoop-aws.
        for k, v in {
            "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "fs.s3a.endpoint": a.s3_endpoint,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.endpoint.region": a.region,
            "fs.s3a.aws.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
        }.items():
            b = b.config(f"spark.hadoop.{k}", v)
    for kv in a.conf:
        k, v = kv.split("=", 1)
        b = b.config(k, v)
    return b.getOrCreate()


def jvm_peak_rss_mb(spark):
    try:
        pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024)
    except Exception:  # noqa: BLE001
        return None
    return None


def answer(spark, req):
    t = time.perf_counter()
    if "table" in req:
        df = spark.table(req["table"])
    elif "load" in req:
        df = spark.read.format("iceberg").load(req["load"])
    elif "sql" in req:
        df = spark.sql(req["sql"])
    else:
        raise ValueError("request needs table, load or sql")
    if req.get("order_by"):
        df = df.orderBy(*req["order_by"].split(","))
    rows = [r.asDict(recursive=True) for r in df.collect()]
    return {"ok": True, "columns": df.columns, "rows": rows, "ms": round((time.perf_counter() - t) * 1000, 1)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jars", default=os.path.join(ROOT, ".readers", "jars"))
    p.add_argument("--driver-memory", default="768m")
    p.add_argument("--jdbc", action="append", default=[], metavar="NAME=JDBC_URI")
    p.add_argument("--hadoop", action="append", default=[], metavar="NAME=WAREHOUSE")
    p.add_argument("--glue", action="append", default=[], metavar="NAME")
    p.add_argument("--warehouse", action="append", default=[], metavar="NAME=LOCATION")
    p.add_argument("--glue-endpoint")
    p.add_argument("--s3-endpoint")
    p.add_argument("--region", default=os.environ.get("AWS_REGION", "us-east-1"))
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    a = p.parse_args()

    t0 = time.perf_counter()
    spark = build_session(a)
    spark.sparkContext.setLogLevel("ERROR")
    # The first query pays for class loading; count it as start-up.
    spark.sql("SELECT 1").collect()
    emit({"ready": True, "spark": spark.version, "start_ms": round((time.perf_counter() - t0) * 1000, 1),
          "jvm_pid": spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()})
    try:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            import json

            req = json.loads(line)
            if req.get("quit"):
                break
            try:
                emit(answer(spark, req))
            except Exception as e:  # noqa: BLE001 - the test wants the message
                msg = str(e).strip().splitlines()
                emit({"ok": False, "error": f"{type(e).__name__}: {' | '.join(msg[:6])}"})
    finally:
        peak = jvm_peak_rss_mb(spark)
        t = time.perf_counter()
        spark.stop()
        emit({"bye": True, "jvm_peak_rss_mb": peak, "stop_ms": round((time.perf_counter() - t) * 1000, 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
