"""The one clock every record, lease, status row and file stamp reads: milliseconds since the epoch.

Integer arithmetic on `time.time_ns()` (never `time.time() * 1000`, a float that can round one way on one
call and the other way on the next), so two stamps taken in order never come out of order by rounding.
Tests that fix an instant patch the name where it is used.
"""
from __future__ import annotations

import os
import time


def now_ms() -> int:
    """Milliseconds since the epoch, as an integer."""
    return time.time_ns() // 1_000_000


def half_the_cores(at_least: int = 1) -> int:
    """Half this machine's cores, never fewer than `at_least` (nor more than the machine has: a single
    core is one): what a background computation takes, leaving the rest to the seats and searches."""
    cores = os.cpu_count() or 1
    return 1 if cores == 1 else max(at_least, cores // 2)
