"""The timing toolkit of the benchmarks and the demo: interleaved rounds (every contender
sees the same slow spells of a shared machine), calls per sample calibrated to a minimum
time, rounds re-measured when another process took CPU time meanwhile, the machine's copy
bandwidth, and a progress bar (tqdm)."""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import torch

__all__ = ["Progress", "time_interleaved", "time_interleaved_stats", "calibrate", "measure", "OthersMeter", "cpu_busy",
           "wait_quiet", "machine_copy_bandwidth", "copy_of"]


class Progress:
    """A progress bar on stderr (tqdm): ``step(label)`` after each of ``total`` steps."""

    def __init__(self, total: int, enabled: bool = True):
        from tqdm import tqdm

        self._bar = tqdm(total=total, disable=not enabled, file=sys.stderr, ncols=100,
                         bar_format="[{bar:24}] {n_fmt}/{total_fmt} {desc} ({elapsed})")

    def step(self, label: str) -> None:
        self._bar.set_description_str(label, refresh=False)
        self._bar.update(1)
        if self._bar.n >= self._bar.total:
            self._bar.close()


def time_interleaved(fns: dict[str, Callable[[], object]], repeats: int,
                     warmup: int = 3, block: int = 5, settle: int = 2) -> dict[str, float]:
    """Median seconds per call of each function (``time_interleaved_stats``' medians)."""
    stats = time_interleaved_stats(fns, repeats, warmup, block, settle)
    return {name: st["median"] for name, st in stats.items()}


def time_interleaved_stats(fns: dict[str, Callable[[], object]], repeats: int,
                           warmup: int = 3, block: int = 5,
                           settle: int = 2) -> dict[str, dict[str, float]]:
    """Seconds per call of each function, timed in ``repeats`` rounds: its ``median``,
    ``min``, ``max``, quartiles ``q1`` / ``q3`` and the number of timed calls ``n``. In a round
    each function runs ``settle`` untimed calls and then ``block`` timed ones, in turn:
    the rounds spread a shared machine's slow spells over every contender alike, and the
    consecutive calls measure what a process serving one model sees, the caches holding
    that model's weights. (Alternating single calls measure something else: on the 2-vCPU
    VM of the README, each call then finds its weights evicted by the other contenders',
    which cost every contender 35-50%, and most the one whose weights the others do not
    share, such as op_sdk's prepacked copies.)"""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            for _ in range(settle):
                fn()
            for _ in range(block):
                t = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t)
    out = {}
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [ts[0]] * 3
        out[name] = {"median": statistics.median(ts), "min": min(ts), "max": max(ts),
                     "q1": q[0], "q3": q[2], "n": len(ts)}
    return out


def calibrate(fn, min_time=2e-3, max_number=2000) -> int:
    """How many calls make one timed sample of at least min_time seconds."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    return int(max(1, min(max_number, min_time / one)))


def _busy_ticks() -> int:
    """Non-idle clock ticks of the whole machine, all CPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def _own_ticks() -> int:
    """Clock ticks this process has run (user + system, all its threads)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class OthersMeter:
    """CPU time other processes used while we measured: the machine is shared, and another
    process on a CPU stalls every parallel region of ours (and of Inductor's code) until the
    scheduler gives the CPU back. Tick resolution (10 ms), which is what rounds need."""

    def __enter__(self):
        self.busy, self.own = _busy_ticks(), _own_ticks()
        return self

    def __exit__(self, *exc):
        self.ticks = (_busy_ticks() - self.busy) - (_own_ticks() - self.own)


def cpu_busy(interval=0.3) -> float:
    """Fraction of the machine's CPU time not idle over `interval` seconds (all processes)."""
    with open("/proc/stat") as f:
        v0 = [int(x) for x in f.readline().split()[1:]]
    time.sleep(interval)
    with open("/proc/stat") as f:
        v1 = [int(x) for x in f.readline().split()[1:]]
    total = sum(v1) - sum(v0)
    return 1.0 - ((v1[3] + v1[4]) - (v0[3] + v0[4])) / max(1, total)


def wait_quiet(timeout: float, threshold=0.1) -> bool:
    """Wait until nothing else runs on the machine; False on timeout."""
    end = time.time() + timeout
    while True:
        if cpu_busy() < threshold:
            return True
        if time.time() > end:
            return False


def measure(fns: dict[str, Callable], repeats: int, quiet_timeout: float,
            max_tries: int = 4) -> dict:
    """Median seconds per call of each fn, sampled round-robin (one sample of each per
    round). A round during which other processes used CPU is measured again (up to
    max_tries times per round); `contended` counts the rounds kept anyway."""
    numbers = {k: calibrate(f) for k, f in fns.items()}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    contended = 0
    if quiet_timeout > 0:
        wait_quiet(quiet_timeout)
    for _ in range(repeats):
        for attempt in range(max_tries):
            if attempt > 0 and quiet_timeout > 0:
                wait_quiet(quiet_timeout)
            got = {}
            with OthersMeter() as others:
                for k, f in fns.items():
                    n = numbers[k]
                    t0 = time.perf_counter()
                    for _ in range(n):
                        f()
                    got[k] = (time.perf_counter() - t0) / n
            if others.ticks <= 1 or attempt == max_tries - 1:
                contended += others.ticks > 1
                break
        for k, v in got.items():
            samples[k].append(v)
    return {"median_s": {k: statistics.median(v) for k, v in samples.items()},
            "min_s": {k: min(v) for k, v in samples.items()}, "contended_rounds": contended}


def machine_copy_bandwidth(nbytes=256 << 20, repeats=20) -> float:
    """GB/s of a large .copy_: bytes read + written per second."""
    src = torch.empty(nbytes // 4, dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        dst.copy_(src)
        times.append(time.perf_counter() - t0)
    return 2 * nbytes / statistics.median(times) / 1e9


def copy_of(nbytes: int) -> Callable:
    """A .copy_ moving nbytes in all (half read, half written)."""
    n = max(1, nbytes // 2 // 4)
    src = torch.empty(n, dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)
