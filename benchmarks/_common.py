"""What the benchmark scripts share: summary statistics of a result over seeds."""

from __future__ import annotations

import statistics


def stats(values) -> dict:
    """Mean, sample standard deviation and the values themselves (None values are left out)."""
    values = [v for v in values if v is not None]
    return {"mean": round(statistics.mean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0, "values": values}
