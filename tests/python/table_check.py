"""Reads a basin's table tier the way users do and prints what each engine sees.

usage: table_check.py LOCATION BASIN [--endpoint URL] [--sql QUERY]... [--filter EXPR]...

LOCATION is the store's URL (file:///dir or s3://bucket). Two readers:
- DuckDB over the Parquet files the committed table state names (`files` in
  tables/<BASIN>/state.json, read by DuckDB itself, as docs/tables.md shows), through a
  pyarrow S3 file system registered with DuckDB for s3:// (no extension download);
- pyiceberg: StaticTable.from_metadata on the metadata file the version hint names, scanned.
Prints one JSON object: each reader's rows, sorted by stream and seq_num, as
[stream, seq_num, timestamp_ms, [[key_hex, value_hex], ...], body_hex]; each --sql query's
result for both readers ({T} in the query is the reader's table); for each --filter, the
rows pyiceberg's scan with that row filter returns (pruning files by the metadata's
bounds and partitions) and the rows DuckDB finds with it as a WHERE clause; the table
metadata's snapshot count and each schema's column names.
"""
import argparse
import json

import duckdb
import pyarrow.fs as pafs
from fsspec.implementations.arrow import ArrowFSWrapper
from pyiceberg.table import StaticTable

parser = argparse.ArgumentParser()
parser.add_argument("location")
parser.add_argument("basin")
parser.add_argument("--endpoint")
parser.add_argument("--sql", action="append", default=[])
parser.add_argument("--filter", action="append", default=[])
args = parser.parse_args()

root = f"{args.location.rstrip('/')}/tables/{args.basin}"
if args.location.startswith("s3://"):
    s3 = pafs.S3FileSystem(endpoint_override=args.endpoint, scheme="http", access_key="test",
                           secret_key="test", region="us-east-1")
    fs, strip = s3, "s3://"
    duckdb.register_filesystem(ArrowFSWrapper(s3))
    properties = {"s3.endpoint": args.endpoint, "s3.access-key-id": "test",
                  "s3.secret-access-key": "test", "s3.region": "us-east-1"}
else:
    fs, strip = pafs.LocalFileSystem(), "file://"
    properties = {}


def read_text(uri):
    with fs.open_input_stream(uri.removeprefix(strip)) as f:
        return f.read().decode()


version = read_text(f"{root}/metadata/version-hint.text").strip()
metadata_file = f"{root}/metadata/v{version}.metadata.json"
metadata = json.loads(read_text(metadata_file))
table = StaticTable.from_metadata(metadata_file, properties=properties)
iceberg_rows = table.scan().to_arrow()

base = args.location.rstrip("/").removeprefix("file://")
state = f"{base}/tables/{args.basin}/state.json"
duckdb.sql(f"SET VARIABLE lists = ['{state}'] || (SELECT coalesce(list('{base}/' || a.path), []) "
           f"FROM (SELECT unnest(archives) AS a FROM read_json('{state}')))")
duckdb.sql(f"SET VARIABLE files = (SELECT list('{base}/' || f.path) "
           f"FROM (SELECT unnest(files) AS f FROM read_json(getvariable('lists'), union_by_name = true)))")
sources = {
    "duckdb": "read_parquet(getvariable('files'), union_by_name = true, hive_partitioning = false)",
    "iceberg": "iceberg_rows",
}
ROWS = ("select stream, seq_num, epoch_ms(timestamp), "
        "list_transform(headers, h -> [hex(h.key), hex(h.value)]), hex(body) from {T} order by 1, 2")
out = {"snapshots": len(metadata.get("snapshots", [])), "version": int(version),
       "schemas": [[f["name"] for f in s["fields"]] for s in metadata["schemas"]]}
for name, source in sources.items():
    rows = duckdb.sql(ROWS.replace("{T}", source)).fetchall()
    out[name] = [[s, q, t, h, b] for (s, q, t, h, b) in rows]
    out[name + "_sql"] = [duckdb.sql(q.replace("{T}", source)).fetchall() for q in args.sql]
out["filters"] = [
    [table.scan(row_filter=f).to_arrow().num_rows,
     duckdb.sql(f"select count(*) from {sources['duckdb']} where {f}").fetchone()[0]]
    for f in args.filter
]
print(json.dumps(out, default=str))
