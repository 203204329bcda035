"""The benchmark data layer: schema, loading, validation, builder and the demo source."""

from fks.data.load import Benchmark, find_benchmark_files, load_benchmark
from fks.data.schema import Fact, GenerationRecord, JudgedRecord, Query, ScoredRecord

__all__ = [
    "Benchmark",
    "Fact",
    "GenerationRecord",
    "JudgedRecord",
    "Query",
    "ScoredRecord",
    "find_benchmark_files",
    "load_benchmark",
]
