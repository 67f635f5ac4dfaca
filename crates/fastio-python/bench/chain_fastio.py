"""A node of the chain bench (`cargo xtask bench chain`) as a fastio
streaming operator: ``python chain_fastio.py source|stage|sink``.

The same work as the Rust operator (``fio-chainop``) and the dora-rs node
(``chain_dora.py``): the source copies a prepared frame (its number in the
first 8 bytes) into each output frame, the stage copies each input frame to
its output, the sink reads each frame's number and writes what it measured
to the file ``RESULT`` (see ``chain_result.py``)."""

import os
import sys
import time

import numpy as np

import fastio
from chain_result import Sink

PORT = "frame"


def main() -> None:
    role = sys.argv[1]
    op = fastio.Operator.from_env()
    if role == "source":
        size = int(os.environ["SIZE"])
        pause = int(os.environ.get("PAUSE_US", "0")) / 1e6
        prepared = (np.arange(size) % 256).astype(np.uint8)
        for frame in op:
            prepared[:8] = np.frombuffer(np.uint64(frame.seq).tobytes(), np.uint8)
            frame.write(PORT, prepared)
            frame.done()
            if pause:
                time.sleep(pause)
    elif role == "stage":
        for frame in op:
            frame.write(PORT, frame.input(PORT))
    elif role == "sink":
        sink = Sink()
        for frame in op:
            view = frame.input(PORT)
            sink.frame(int(view[:8].view(np.uint64)[0]), frame.seq, frame.timestamp_ns)
            del view
        sink.write()
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main()
