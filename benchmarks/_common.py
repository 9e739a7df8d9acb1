"""What the benchmark scripts share: summary statistics over seeds, and writing their JSON files."""

from __future__ import annotations

import json
import statistics
from pathlib import Path


def stats(values) -> dict:
    """Mean, sample standard deviation and the values themselves (None values are left out)."""
    values = [v for v in values if v is not None]
    return {"mean": round(statistics.mean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0, "values": values}


def write_json(path: Path, data) -> None:
    """`data` as indented JSON with a final newline, creating the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
