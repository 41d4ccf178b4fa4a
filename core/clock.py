"""The one clock every record, lease, status row and file stamp reads: milliseconds since the epoch.

Integer arithmetic on `time.time_ns()` (never `time.time() * 1000`, a float that can round one way on one
call and the other way on the next), so two stamps taken in order never come out of order by rounding.
Tests that fix an instant patch the name where it is used.

Below it, the knowledge bank's calendar (ages, decay, when a cron job is due): `calendar_now()`, which
CREWLET_NOW sets for drills and tests, with the durations and cron expressions its settings are written in.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import time
from datetime import datetime, timedelta, UTC


def now_ms() -> int:
    """Milliseconds since the epoch, as an integer."""
    return time.time_ns() // 1_000_000


def half_the_cores(at_least: int = 1) -> int:
    """Half this machine's cores, never fewer than `at_least` (nor more than the machine has: a single
    core is one): what a background computation takes, leaving the rest to the seats and searches."""
    cores = os.cpu_count() or 1
    return 1 if cores == 1 else max(at_least, cores // 2)


# -- the knowledge bank's calendar: ages, decay, when a cron job is due --------------------------------------
#
# A drill or a test sets CREWLET_NOW to an ISO date-time ("2027-03-01T03:00:00Z") and the bank's calendar
# decisions — how old an entry is, whether decay archives it, whether a nightly job is due — are taken at
# that instant, standing still. Only those: `now_ms()` above stays the real clock, because records, leases
# and peers order themselves by it and a clock that stood still (or ran backwards) would break their order.

NOW_ENV = "CREWLET_NOW"
_MS = timedelta(milliseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_clock_log = logging.getLogger("crewlet.clock")


@functools.lru_cache(maxsize=16)
def _fixed_instant(text: str) -> datetime | None:
    """CREWLET_NOW read (naive → UTC); None, said once per value, when it is not an ISO date-time. Cached per
    text, so a bad value is warned about once however often the calendar is asked."""
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        _clock_log.warning("%s=%r is not an ISO date-time (e.g. 2027-03-01T03:00:00Z): ignored, the real clock "
                           "applies", NOW_ENV, text)
        return None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def calendar_now() -> datetime:
    """Now, in UTC, for the bank's calendar: CREWLET_NOW when it holds an ISO date-time, else the real clock.
    Read at each call, so a test that sets the variable moves the calendar at once."""
    text = os.environ.get(NOW_ENV, "").strip()
    fixed = _fixed_instant(text) if text else None
    return fixed if fixed is not None else datetime.now(UTC)


def calendar_is_fixed() -> bool:
    """Whether CREWLET_NOW holds the calendar still (set, and readable as a date-time)."""
    text = os.environ.get(NOW_ENV, "").strip()
    return bool(text) and _fixed_instant(text) is not None


def calendar_now_ms() -> int:
    """`calendar_now()` as integer milliseconds since the epoch (the unit records are stamped in)."""
    return to_ms(calendar_now())


def to_ms(at: datetime) -> int:
    """An aware instant as integer milliseconds since the epoch (integer arithmetic, as `now_ms`)."""
    return (at - _EPOCH) // _MS


def from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def age_ms(since_ms: int, now: datetime | None = None) -> int:
    """How long ago `since_ms` was on the calendar, never below 0 (another node's stamp may run ahead)."""
    return max(0, to_ms(now or calendar_now()) - since_ms)


def older_than_days(since_ms: int, days: float, now: datetime | None = None) -> bool:
    """Whether `since_ms` lies more than `days` days back on the calendar (decay's question)."""
    return age_ms(since_ms, now) > days * 86_400_000


# -- durations: "90m", "6h", "1d", "1h30m" ---------------------------------------------------------------------

_UNIT_S = {"s": 1, "m": 60, "h": 3_600, "d": 86_400, "w": 604_800}
_DURATION_RE = re.compile(r"(\d+)\s*([smhdw])")


def parse_duration(text: str) -> int:
    """A duration written as numbers with units (s, m, h, d, w: "90m", "6h", "1d", "1h30m") in seconds;
    ValueError saying why for anything else ("6x", "6", "")."""
    squeezed = text.strip().lower()
    if not squeezed:
        raise ValueError("is empty")
    pos, total = 0, 0
    for match in _DURATION_RE.finditer(squeezed):
        if squeezed[pos:match.start()].strip():
            break
        total += int(match.group(1)) * _UNIT_S[match.group(2)]
        pos = match.end()
    if pos == 0 or squeezed[pos:].strip():
        raise ValueError(f"{text!r} is not a duration (a number and a unit: s, m, h, d or w, e.g. 90m, 6h or 1d)")
    return total


def duration_text(seconds: int) -> str:
    """Seconds written back as a duration, in the largest units that divide it ("6h", "90m", "1d")."""
    if seconds == 0:
        return "0m"
    out = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= size:
            out.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(out)


# -- cron expressions (five fields, UTC), read by cronsim ---------------------------------------------------------
# cronsim, imported where a cron is read: every command imports this module for now_ms, and none but the
# bank's jobs needs a cron (docs/entries.md: why cronsim).

def cron_problem(expr: str) -> str | None:
    """Why `expr` is not a five-field cron expression cronsim can schedule (None when it is)."""
    from cronsim import CronSim, CronSimError

    fields = expr.split()
    if len(fields) != 5:
        return (f"{expr!r} has {len(fields)} field{'s' if len(fields) != 1 else ''}; a cron expression has five: "
                "minute hour day-of-month month day-of-week, e.g. 0 3 * * *")
    try:
        CronSim(expr, _EPOCH)
    except CronSimError as exc:
        return f"{expr!r} is not a cron expression ({str(exc).lower() or 'unreadable'})"
    return None


def cron_explained(expr: str) -> str:
    """The expression in words ("At 04:00 on Monday"), or '' where cronsim has none for it."""
    from cronsim import CronSim

    try:
        return CronSim(expr, _EPOCH).explain()
    except Exception:  # noqa: BLE001 - words are a courtesy; the expression itself was checked when read
        return ""


def next_cron(expr: str, after: datetime) -> datetime:
    """The first instant after `after` (strictly) at which `expr` fires, in UTC."""
    from cronsim import CronSim

    return next(CronSim(expr, after.astimezone(UTC)))


def cron_due(expr: str, last_run_ms: int | None, now: datetime | None = None) -> bool:
    """Whether a job on `expr` is due: it fired (on the calendar) since its last run; a job that never ran is
    due at once."""
    if last_run_ms is None:
        return True
    return next_cron(expr, from_ms(last_run_ms)) <= (now or calendar_now())
