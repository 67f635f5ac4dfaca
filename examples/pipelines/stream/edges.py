"""The streaming demo's Python stage: the gradient magnitude of each
luminance frame (numpy), zero copy in, one copy out."""

import numpy as np

import fastio

op = fastio.Operator.from_env()
n = 0
for frame in op:
    luma = frame.input("luma")  # read-only view of the shared slot
    gy, gx = np.gradient(luma)
    frame.write("edges", np.hypot(gx, gy))
    n += 1
print(f"edges: {n} frames")
