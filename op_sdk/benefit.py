"""The fusion benefit model: does replacing a group of operators by one fused operator pay?

A candidate fusion (an FX match, an ONNX node group) is described by what each side
moves and launches (``Side``: bytes read + written from device memory, kernel launches)
and by the shape of the fused kernel's work (``Tiling``: rows, row length, element
size). ``predict`` prices both sides on a ``DeviceModel``:

    time(side)  = bytes / bandwidth + launches * launch_seconds
    tiling loss = the fused kernel's extra time from its tiling:
                  * idle cores: a row-split kernel gives whole rows to cores, so with
                    rows < cores only ``rows`` cores stream the data, while the unfused
                    elementwise kernels split by elements: over every core, or over
                    ``elements / grain`` cores when the work is too small to split
                    further (``DeviceModel.grain``: ATen's CPU kernels split no finer
                    than 32768 elements, so a one-row decode step runs on one core
                    either way);
                  * spilled rows: a row that does not fit the core's local buffer
                    (``local_bytes``, with ``buffers`` live copies) is read twice
                    (one pass for the statistics, one to normalise / quantise)
    benefit     = time(unfused) - time(fused) - tiling loss

and a fusion is applied only when ``benefit > threshold`` (``Prediction.accepted``).

The model is deliberately simple (roofline bytes + a launch term, as seed 004's
graph-autofusion describes it); its parameters per device are in ``DEVICE_MODELS``, and
the measured CPU one (``DeviceModel.measured_cpu``) times a copy once, lazily. Its error
against measured times is what ``op-sdk bench`` reports next to each prediction.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re

__all__ = ["Side", "Tiling", "DeviceModel", "Prediction", "predict", "DEVICE_MODELS",
           "device_model"]


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a fusion: bytes moved through device memory and kernels launched."""

    bytes: int
    launches: int

    def seconds(self, device: DeviceModel) -> float:
        return self.bytes / device.bandwidth + self.launches * device.launch_seconds


@dataclasses.dataclass(frozen=True)
class Tiling:
    """The fused kernel's work: ``rows`` independent rows of ``cols`` elements of
    ``itemsize`` bytes, each needing ``buffers`` row-sized local buffers (input, fp32
    temporaries, output) to be processed in one pass."""

    rows: int
    cols: int
    itemsize: int = 2
    buffers: int = 4


@dataclasses.dataclass(frozen=True)
class DeviceModel:
    name: str
    bandwidth: float        # bytes / s of device memory (a streaming copy: read + write)
    launch_seconds: float   # per kernel launch (host dispatch + start)
    cores: int              # cores a row-split kernel spreads rows over
    local_bytes: int        # per core buffer a row must fit for one pass (UB on Ascend)
    source: str = ""        # where the numbers come from
    grain: int = 1          # elements below which an elementwise kernel uses one core less

    @staticmethod
    @functools.lru_cache(1)
    def measured_cpu() -> DeviceModel:
        """This host: copy bandwidth timed once (64 MiB, best of 5), one launch = one
        eager operator dispatch (timed on a tiny add), cores = intra-op threads. Measured
        on real tensors whatever dispatch mode is current (the first call usually comes
        from a compile's pattern pass, under its fake tensor mode)."""
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            return DeviceModel._measure_cpu()

    @staticmethod
    def _measure_cpu() -> DeviceModel:
        import time

        import torch

        src = torch.empty(16 * 2**20, dtype=torch.float32).fill_(1.0)
        dst = torch.empty_like(src)
        best = math.inf
        for _ in range(5):
            t = time.perf_counter()
            dst.copy_(src)
            best = min(best, time.perf_counter() - t)
        bandwidth = 2 * src.numel() * src.element_size() / best
        a = torch.ones(8)
        b = torch.ones(8)
        for _ in range(100):
            torch.add(a, b)
        n = 2000
        t = time.perf_counter()
        for _ in range(n):
            torch.add(a, b)
        launch = (time.perf_counter() - t) / n
        return DeviceModel("cpu", bandwidth, launch, torch.get_num_threads(), 2 * 2**20,
                           source="measured on this host: 64 MiB copy, eager add dispatch; "
                                  "grain: ATen's at::internal::GRAIN_SIZE",
                           grain=32768)


# Planning numbers for devices not at hand (not measured here): Atlas A2 (Ascend 910B)
# HBM bandwidth and its 48 AI vector cores with 192 KiB unified buffer each (the
# DEFAULT_UB_BYTES of kernels/ascendc/common/tiling_common.h); H100 SXM HBM3.
DEVICE_MODELS: dict[str, DeviceModel] = {
    "npu": DeviceModel("npu", 1.6e12, 5e-6, 48, 192 * 1024,
                       source="Atlas A2 datasheet HBM bandwidth; 48 vector cores, 192 KiB UB"),
    "cuda": DeviceModel("cuda", 3.0e12, 4e-6, 132, 228 * 1024,
                        source="H100 SXM datasheet HBM3 bandwidth; 132 SMs, 228 KiB SMEM"),
}


def device_model(device: str) -> DeviceModel:
    """``"cpu"`` (measured here, once), ``"npu"`` or ``"cuda"`` (planning numbers)."""
    if device == "cpu":
        return DeviceModel.measured_cpu()
    try:
        return DEVICE_MODELS[device]
    except KeyError:
        raise ValueError(f"op_sdk.benefit: no device model {device!r}; choose from "
                         f"{['cpu', *DEVICE_MODELS]}") from None


@dataclasses.dataclass(frozen=True)
class Prediction:
    before: Side
    after: Side
    seconds_before: float
    seconds_after: float
    tiling_loss: float       # seconds
    benefit: float           # seconds saved (negative: the fusion costs time)
    threshold: float
    device: str

    @property
    def accepted(self) -> bool:
        return self.benefit > self.threshold

    @property
    def reason(self) -> str:
        """Why the model rejects it ('' when accepted)."""
        if self.accepted:
            return ""
        return (f"predicted benefit {self.benefit * 1e6:.2f} us <= threshold "
                f"{self.threshold * 1e6:.2f} us on {self.device} (unfused "
                f"{self.seconds_before * 1e6:.2f} us: {self.before.bytes} B, "
                f"{self.before.launches} launches; fused {self.seconds_after * 1e6:.2f} us: "
                f"{self.after.bytes} B, {self.after.launches} launches; tiling loss "
                f"{self.tiling_loss * 1e6:.2f} us)")

    @staticmethod
    def device_of(reason: str) -> str | None:
        """The device a rejection's ``reason`` was priced on (None: not such a reason)."""
        m = re.search(r" us on (\w+) \(unfused ", reason)
        return m.group(1) if m else None

    def as_dict(self) -> dict:
        return {"bytes_before": self.before.bytes, "bytes_after": self.after.bytes,
                "launches_before": self.before.launches, "launches_after": self.after.launches,
                "seconds_before": self.seconds_before, "seconds_after": self.seconds_after,
                "tiling_loss": self.tiling_loss, "benefit": self.benefit,
                "threshold": self.threshold, "device": self.device, "accepted": self.accepted}


def tiling_loss(after: Side, tiling: Tiling | None, device: DeviceModel) -> float:
    """Seconds the fused kernel loses to its tiling (see the module doc)."""
    if tiling is None or tiling.rows <= 0:
        return 0.0
    stream = after.bytes / device.bandwidth
    loss = 0.0
    # cores the unfused elementwise kernels spread over, and the fused row-split kernel
    split = min(device.cores, max(1, math.ceil(tiling.rows * tiling.cols / device.grain)))
    if tiling.rows < split:  # only `rows` cores stream: the rest of the data waits
        loss += stream * (split / tiling.rows - 1.0)
    row_bytes = tiling.cols * max(tiling.itemsize, 4) * tiling.buffers
    if row_bytes > device.local_bytes:  # one more read of the input rows
        loss += tiling.rows * tiling.cols * tiling.itemsize / device.bandwidth
    return loss


def predict(before: Side, after: Side, device: DeviceModel, tiling: Tiling | None = None,
            threshold: float = 0.0) -> Prediction:
    """Price a candidate fusion (see the module doc); ``threshold`` in seconds."""
    sb, sa = before.seconds(device), after.seconds(device)
    loss = tiling_loss(after, tiling, device)
    return Prediction(before, after, sb, sa, loss, sb - sa - loss, threshold, device.name)
