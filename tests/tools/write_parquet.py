"""Writes the rows of a JSONL file as a Parquet file, with pyarrow.

Usage: python write_parquet.py IN.jsonl OUT.parquet [COMPRESSION]

Each line's object is a row, each field a column (pyarrow infers the
types: strings, integers, lists), with the compression Hugging Face's
converter uses by default (snappy) unless another is named (`zstd`,
`gzip`, `none`). Run by tests/it/task_parquet.rs in the pinned venv.
"""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq

source, target = sys.argv[1], sys.argv[2]
compression = sys.argv[3] if len(sys.argv) > 3 else "snappy"
with open(source, encoding="utf-8") as f:
    rows = [json.loads(line) for line in f if line.strip()]
# Small row groups, so a file holds several, as large published files do.
pq.write_table(pa.Table.from_pylist(rows), target, compression=compression, row_group_size=7)
print(pa.__version__)
