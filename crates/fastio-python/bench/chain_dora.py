"""A node of the chain bench (`cargo xtask bench chain`) as a dora-rs
Python node (PyPI ``dora-rs``): ``python chain_dora.py source|stage|sink``,
run by ``dora run`` from the dataflow xtask writes.

The same work as our operators (``chain_fastio.py``, ``fio-chainop``): the
source sends a prepared frame (its number in the first 8 bytes, its source
timestamp in the metadata) ``FRAMES`` times, the stage sends each input on,
the sink reads each frame's number and writes what it measured to the file
``RESULT`` (see ``chain_result.py``)."""

import os
import sys
import time

import numpy as np
import pyarrow as pa
from dora import Node

from chain_result import Sink

PORT = "frame"


def main() -> None:
    role = sys.argv[1]
    node = Node()
    if role == "source":
        size = int(os.environ["SIZE"])
        frames = int(os.environ["FRAMES"])
        pause = int(os.environ.get("PAUSE_US", "0")) / 1e6
        prepared = (np.arange(size) % 256).astype(np.uint8)
        for seq in range(frames):
            ts = time.time_ns()
            prepared[:8] = np.frombuffer(np.uint64(seq).tobytes(), np.uint8)
            node.send_output(PORT, pa.array(prepared), {"ts": ts, "seq": seq})
            if pause:
                time.sleep(pause)
    elif role == "stage":
        for event in node:
            if event["type"] == "INPUT":
                node.send_output(PORT, event["value"], event["metadata"])
    elif role == "sink":
        sink = Sink()
        for event in node:
            if event["type"] == "INPUT":
                view = event["value"].to_numpy(zero_copy_only=True)
                meta = event["metadata"]
                sink.frame(int(view[:8].view(np.uint64)[0]), meta["seq"], meta["ts"])
                del view
        sink.write()
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main()
