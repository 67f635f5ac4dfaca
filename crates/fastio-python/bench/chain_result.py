"""What a chain-bench sink measured, written as the Rust sink
(``fio-chainop``) writes it: ``count N``, ``disorder N``, ``torn N``, ``first_ns T``, ``last_ns T`` and
``lat_ns L...`` (wall-clock ns; latency since the frame's source
timestamp), or with ``WAIT_MS`` (the sink waits first, then times its own
loop over frames that are already there) ``count N`` and ``loop_ns T``."""

import os
import time


class Sink:
    """Collects one sink's measurements, and counts frames out of order
    (``disorder``) and frames whose payload is not the frame the metadata
    names (``torn``)."""

    def __init__(self) -> None:
        self.result = os.environ["RESULT"]
        self.wait = os.environ.get("WAIT_MS")
        self.rss_after = int(os.environ.get("RSS_AFTER", "-1"))
        self.rss_at = None
        self.latencies: list = []
        self.first = 0
        self.last = 0
        self.count = 0
        self.expect = 0
        self.disorder = 0
        self.torn = 0
        if self.wait:
            time.sleep(int(self.wait) / 1e3)
        self.started = time.perf_counter_ns()

    def frame(self, payload_seq: int, seq: int, timestamp_ns: int) -> None:
        """A frame: the number in its payload, the number its metadata
        gives, its source timestamp."""
        if seq < self.expect:
            self.disorder += 1
        if payload_seq != seq:
            self.torn += 1
        self.expect = max(self.expect, seq + 1)
        if self.count == self.rss_after:
            self.rss_at = rss_kb()
        self.count += 1
        if self.wait or self.rss_after >= 0:
            return
        now = time.time_ns()
        self.latencies.append(now - timestamp_ns)
        if not self.first:
            self.first = now
        self.last = now

    def write(self) -> None:
        loop_ns = time.perf_counter_ns() - self.started
        with open(self.result, "w") as f:
            f.write(f"count {self.count}\ndisorder {self.disorder}\ntorn {self.torn}\n")
            if self.wait:
                f.write(f"loop_ns {loop_ns}\n")
            elif self.rss_after >= 0:
                f.write(f"rss_kb_at {self.rss_at}\nrss_kb_end {rss_kb()}\n")
            else:
                f.write(f"first_ns {self.first}\nlast_ns {self.last}\n")
                f.write("lat_ns " + " ".join(map(str, self.latencies)) + "\n")


def rss_kb() -> int:
    """This process's resident memory (kB), from ``/proc/self/status``."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")
