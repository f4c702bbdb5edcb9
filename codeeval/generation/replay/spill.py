"""A parsed generations file spilled to a temporary Parquet file, read back one shard at a time.

The replay backend lives as long as the run's process and serves every generation shard; holding
every parsed program for that long made the run's memory grow with n_samples (HumanEval x 200 is
32,800 programs, MBPP x 200 100,000). The spill keeps only each problem's row range in memory."""
from __future__ import annotations

import os
import tempfile
import weakref
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP = 4096  # programs per row group: a shard reads the few groups its rows lie in
SCHEMA = pa.schema([("program", pa.string())])


class Spill:
    """task_id -> programs, in the file's problem order, kept on disk."""

    def __init__(self, programs: Iterable[tuple[str, Sequence[str]]]) -> None:
        """`programs`: (task_id, its programs) pairs, consumed one at a time."""
        fd, self.path = tempfile.mkstemp(prefix="codeeval-replay-", suffix=".parquet")
        os.close(fd)
        self._remove = weakref.finalize(self, _unlink, self.path)
        self.ranges: dict[str, tuple[int, int]] = {}
        try:
            self._write(programs)
        except BaseException:  # a file refused half-way: nothing left behind
            self.close()
            raise

    def _write(self, programs: Iterable[tuple[str, Sequence[str]]]) -> None:
        with pq.ParquetWriter(self.path, SCHEMA) as writer:
            row, batch = 0, []
            for task_id, group in programs:
                self.ranges[task_id] = (row, row + len(group))
                row += len(group)
                batch.extend(group)
                if len(batch) >= ROW_GROUP:
                    writer.write_table(pa.table({"program": batch}, schema=SCHEMA), row_group_size=ROW_GROUP)
                    batch = []
            if batch or not row:
                writer.write_table(pa.table({"program": batch}, schema=SCHEMA), row_group_size=ROW_GROUP)

    def read(self, task_ids: Iterable[str]) -> dict[str, list[str]]:
        """The programs of `task_ids` (a shard: problems next to each other in the file)."""
        wanted = [t for t in dict.fromkeys(task_ids) if t in self.ranges]
        if not wanted:
            return {}
        lo = min(self.ranges[t][0] for t in wanted)
        hi = max(self.ranges[t][1] for t in wanted)
        parquet = pq.ParquetFile(self.path)
        groups, first, start = [], None, 0
        for g in range(parquet.num_row_groups):
            size = parquet.metadata.row_group(g).num_rows
            if start < hi and start + size > lo:
                groups.append(g)
                first = start if first is None else first
            start += size
        texts = parquet.read_row_groups(groups, columns=["program"]).column("program").to_pylist()
        return {t: texts[self.ranges[t][0] - first:self.ranges[t][1] - first] for t in wanted}

    def close(self) -> None:
        self._remove()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
