"""Which hardware the model stages run on: one setting resolved into one record.

Why: fine-tuning, chunk embedding and pair scoring hard-coded ``device="cpu"``; on a GPU node
they ran on the CPU (an H200 embeds the corpus in seconds, 2 CPU cores take minutes). The
setting (``INFRA_RAG_DEVICE``, read by ``settings.device``) is one of ``auto`` (CUDA when
present, else the CPU: on a CPU-only machine exactly what ran before), ``cpu``, ``cuda``,
``cuda:N`` or ``mps``. ``resolve`` checks it before any work starts and says what is wrong
in one line naming the setting.

The record carries what differs per device and nothing that changes results' addresses:
content hashes never include the device. Precision is fp32 on the CPU and MPS, bf16 autocast
on CUDA (fp16 where bf16 is unsupported); batch sizes per stage are throughput choices (the
training batch is part of the recipe and never changes with the device). CPU threads are the
cores this process may use (its affinity mask, capped by a cgroup ``cpu.max`` quota).

Framework-free and torch-light: torch is imported only when a record is resolved.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SETTING = "INFRA_RAG_DEVICE"
CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
_PATTERN = re.compile(r"^(auto|cpu|mps|cuda)(?::(\d+))?$")

# texts (or pairs) per forward pass. CPU embedding: 8 measured fastest on 2 cores (23.9 texts/s
# vs 19.4 at 32 and 16.5 at 64, length-sorted chunks, 2026-12-02); on a GPU, big batches fill it.
BATCH_SIZES = {
    "cpu": {"embed": 8, "score": 32},
    "cuda": {"embed": 256, "score": 512},
    "mps": {"embed": 64, "score": 128},
}


class DeviceSettingError(ValueError):
    """The device setting names hardware this machine does not have (or no hardware at all)."""


@dataclass(frozen=True)
class Device:
    """One resolved device: where tensors go, in which precision, with how many CPU threads."""

    setting: str  # as given, e.g. "auto"
    torch_device: str  # "cpu", "cuda:0", "mps"
    precision: str  # "fp32", "bf16", "fp16"
    threads: int  # CPU threads torch may use (cores this process may run on)

    @property
    def kind(self) -> str:
        return self.torch_device.split(":")[0]

    def batch_size(self, stage: str) -> int:
        """Texts (``embed``) or pairs (``score``) per forward pass on this device."""
        return BATCH_SIZES[self.kind][stage]

    def apply_threads(self) -> None:
        """Let torch use every core this process may use, no more (a cgroup quota of 2 cores
        on a 64-core node would otherwise run 64 threads fighting over 2 cores)."""
        import torch

        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)

    @contextlib.contextmanager
    def autocast(self) -> Iterator[None]:
        """Mixed precision on CUDA (bf16 or fp16); a no-op in fp32."""
        if self.precision == "fp32":
            yield
            return
        import torch

        dtype = torch.bfloat16 if self.precision == "bf16" else torch.float16
        with torch.autocast(device_type=self.kind, dtype=dtype):
            yield

    def metadata(self) -> dict[str, Any]:
        """What a model asset records: device, precision, threads and library versions."""
        return {"device": self.torch_device, "precision": self.precision, "threads": self.threads, **versions()}


def versions() -> dict[str, str]:
    """torch / transformers / sentence-transformers versions (what computed the numbers)."""
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("torch", "transformers", "sentence-transformers"):
        try:
            found[name.replace("-", "_") + "_version"] = version(name)
        except PackageNotFoundError:
            found[name.replace("-", "_") + "_version"] = ""
    return found


def parse(setting: str | None) -> tuple[str, str | None]:
    """(kind, CUDA ordinal or None) of a well-formed setting; cheap (no torch), so every CLI
    command checks it before any work starts."""
    match = _PATTERN.match((setting or "auto").strip().lower())
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise DeviceSettingError(f"{SETTING}={setting!r} is not one of {', '.join(CHOICES)}")
    return match.group(1), match.group(2)


def resolve(setting: str | None) -> Device:
    """The device ``setting`` names on this machine; ``DeviceSettingError`` when it cannot run here."""
    raw = (setting or "auto").strip().lower()
    kind, index = parse(setting)
    import torch

    threads = cpu_threads()
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    if kind == "cpu":
        return Device(raw, "cpu", "fp32", threads)
    if kind == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DeviceSettingError(f"{SETTING}={setting!r}: MPS is not available on this machine")
        return Device(raw, "mps", "fp32", threads)
    if not torch.cuda.is_available():
        raise DeviceSettingError(f"{SETTING}={setting!r}: CUDA is not available (torch {torch.__version__})")
    count = torch.cuda.device_count()
    ordinal = int(index or 0)
    if ordinal >= count:
        raise DeviceSettingError(f"{SETTING}={setting!r}: this machine has {count} CUDA device(s) (0..{count - 1})")
    precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return Device(raw, f"cuda:{ordinal}", precision, threads)


def cpu_threads() -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup v2/v1 CPU quota and by
    ``OMP_NUM_THREADS`` when set (the usual knob when several processes share the cores)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS has no affinity masks
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    cores = min(cores, math.ceil(quota)) if quota else cores
    asked = os.environ.get("OMP_NUM_THREADS", "").strip()
    if asked.isdigit() and int(asked) > 0:
        cores = min(cores, int(asked))
    return max(1, cores)


def cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs the cgroup quota allows (``cpu.max`` "200000 100000" → 2.0), None when unlimited."""
    try:
        text = (root / "cpu.max").read_text().split()
        if text and text[0] != "max":
            return int(text[0]) / int(text[1])
        return None
    except (OSError, ValueError, IndexError):
        pass
    try:  # cgroup v1
        quota = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((root / "cpu" / "cpu.cfs_period_us").read_text())
        return quota / period if quota > 0 and period > 0 else None
    except (OSError, ValueError):
        return None


def configured() -> Device:
    """The build's device: ``INFRA_RAG_DEVICE`` resolved (``auto`` when unset)."""
    from .. import settings

    return resolve(settings.device())


def for_queries() -> Device:
    """The service's device for query embedding and reranking: the CPU unless ``INFRA_RAG_DEVICE``
    names something other than ``auto`` (a one-sentence forward pass gains little on a GPU)."""
    from .. import settings

    raw = settings.device()
    return resolve(raw if raw.lower() != "auto" else "cpu")


def for_stage(device: str | Device | None = None) -> Device:
    """What a train/score function taking ``device=`` uses: a resolved record as is, a setting
    string resolved, None the configured device. The judge and reader stages call this."""
    if isinstance(device, Device):
        return device
    return resolve(device) if device is not None else configured()
