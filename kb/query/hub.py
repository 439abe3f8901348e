"""A model the catalogue lacks, named by its Hugging Face Hub id: its config.json and weights
index, read through huggingface_hub.

In: a Hub id ('acme/Foo-13B-Instruct') that kb.query.unknown_words found in a query and no
models.yaml entry names (it raises kb.errors.HubModelNamed, which the entry, kb.answered behind
kb.ask and kb.answer_in, catches). Out: a HubModel: the parsed config.json, the commit it was
read at, and what the checkpoint says of its size (model.safetensors.index.json's total_size; the element count and
dtype of every tensor where the safetensors files' headers are in the cache), for
kb.engine.resolving.hfconfig.model_of to make a model entry from; or a HubError saying how to fetch it.

huggingface_hub owns the cache: HF_HOME / HF_HUB_CACHE say where it is, HF_HUB_OFFLINE=1 keeps
every read in it (no network at all), and a file is read at the commit refs/main names there.
Online, a read is given up on after deadline() seconds (KBQ_HUB_TIMEOUT, default DEADLINE_S),
retries included, and each request waits at most FETCH_TIMEOUT_S (HF_HUB_ETAG_TIMEOUT and
HF_HUB_DOWNLOAD_TIMEOUT, the library's own settings, take precedence). Only the config.json and
the index are ever downloaded, never weights. huggingface_hub is imported here, on first use:
a plain query never imports it.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from kb.errors import KbError
from kb.paths import MAX_FILE_BYTES
from dataclasses import dataclass

if TYPE_CHECKING:
    from kb.knowledge.records import JSON, Config

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"                 # a checkpoint of one file has no index
FETCH_TIMEOUT_S = 10.0                       # per request to the Hub
DEADLINE_S = 20.0                            # a whole read, retries included (KBQ_HUB_TIMEOUT)
HEADER_BYTES = 100_000_000                   # the safetensors format's own cap on a header


class HubError(KbError):
    """A Hub model whose config cannot be read (not cached offline, no such repository…)."""


@dataclass(frozen=True, slots=True)
class HubModel:
    """What was read of a Hub model, with where from."""

    repo_id: str
    revision: str                 # the commit hash of the snapshot read
    config: Config                # config.json, parsed
    config_path: str              # where the cache keeps it
    total_size: int | None = None                                     # index metadata, bytes
    tensors: dict[str, int] | None = None    # dtype → elements, from the cached shards' headers


def deadline() -> float:
    """How long a read may take in all, in seconds: KBQ_HUB_TIMEOUT, else DEADLINE_S."""
    text = os.environ.get("KBQ_HUB_TIMEOUT", "").strip()
    try:
        value = float(text) if text else DEADLINE_S
    except ValueError:
        raise HubError(f"KBQ_HUB_TIMEOUT must be a number of seconds, not {text[:40]!r}") from None
    if not 0 < value <= DEADLINE_S * 30:
        raise HubError(f"KBQ_HUB_TIMEOUT must be between 0 and {DEADLINE_S * 30:g} seconds")
    return value


def read(repo_id: str) -> HubModel:
    """The config.json of `repo_id` (downloaded into the cache unless offline), and at the same
    commit its safetensors index and the headers of the weight files already cached. Online,
    the read runs on a thread of its own, waited for at most deadline() seconds (huggingface_hub
    retries a failed request up to five times, backing off, which would hold a caller, a server's
    request among them, for a minute or more); a read given up on goes on finishing into the cache."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return _read(repo_id, True, FETCH_TIMEOUT_S)
    import threading

    wait = deadline()
    done: list[HubModel | BaseException] = []

    def run() -> None:
        try:
            done.append(_read(repo_id, False, min(FETCH_TIMEOUT_S, wait)))
        except BaseException as exc:      # noqa: BLE001 - handed to the caller below
            done.append(exc)

    worker = threading.Thread(target=run, name="kbq-hub-read", daemon=True)
    worker.start()
    worker.join(wait)
    if not done:
        raise HubError(f"{repo_id}: the Hugging Face Hub did not answer within {wait:g} s "
                       f"(KBQ_HUB_TIMEOUT). Fetch its config with `hf download {repo_id} config.json`, "
                       "or pass --model-config path/to/config.json")
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


def _read(repo_id: str, offline: bool, timeout: float) -> HubModel:
    path = _fetch(repo_id, CONFIG, None, offline, timeout)
    if path is None:
        raise HubError(f"{repo_id} has no config.json on the Hugging Face Hub; pass --model-config "
                       "path/to/config.json")
    revision = os.path.basename(os.path.dirname(path))     # the cache's snapshots/<commit>/
    config = _json_object(repo_id, path)
    index_path = _fetch(repo_id, INDEX, revision, offline, timeout)
    total_size, files = None, [SINGLE]
    if index_path is not None:
        index = _json_object(repo_id, index_path)
        meta, weight_map = index.get("metadata"), index.get("weight_map")
        size = meta.get("total_size") if isinstance(meta, dict) else None
        total_size = (int(size) if isinstance(size, (int, float)) and not isinstance(size, bool)
                      and 0 < size < 2 ** 63 else None)           # not inf, NaN or a negative
        files = sorted({str(f) for f in weight_map.values()}) if isinstance(weight_map, dict) else []
    return HubModel(repo_id, revision, config, path, total_size, _cached_tensors(repo_id, revision, files))


def _fetch(repo_id: str, filename: str, revision: str | None, offline: bool, timeout: float) -> str | None:
    """The local path of one file of the repository (from the cache, else downloaded unless
    offline); None when the repository has no such file (or, offline, when it is not cached and
    it is not the config)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (EntryNotFoundError, GatedRepoError, HfHubHTTPError,
                                        LocalEntryNotFoundError, RepositoryNotFoundError,
                                        RevisionNotFoundError)

    try:
        return str(hf_hub_download(repo_id, filename, revision=revision, local_files_only=offline,
                                   etag_timeout=timeout))
    except LocalEntryNotFoundError:      # offline, or the Hub unreachable, and not cached
        if filename != CONFIG:
            return None
        raise HubError(_not_cached(repo_id, offline)) from None
    except EntryNotFoundError:
        return None
    except GatedRepoError:
        raise HubError(f"{repo_id} is gated on the Hugging Face Hub: accept its terms on its page, "
                       f"log in (hf auth login), or pass --model-config config.json") from None
    except RepositoryNotFoundError:
        raise HubError(f"no model '{repo_id}' on the Hugging Face Hub (or it is private: log in "
                       f"with hf auth login), and none in models.yaml; check the name, or pass "
                       f"--model-config config.json") from None
    except RevisionNotFoundError:
        raise HubError(f"{repo_id}: the revision {revision} is not on the Hub") from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HubError(f"{repo_id}: cannot read {filename} from the Hugging Face Hub ({first})") from None


def _not_cached(repo_id: str, offline: bool) -> str:
    from huggingface_hub import constants

    why = "HF_HUB_OFFLINE is set" if offline else "the Hub cannot be reached"
    return (f"no model '{repo_id}' in models.yaml, and its config.json is not in the Hugging Face "
            f"cache ({constants.HF_HUB_CACHE}) while {why}. Fetch it with "
            f"`hf download {repo_id} config.json` (or `huggingface-cli download {repo_id} config.json`), "
            f"or pass --model-config path/to/config.json")


def _json_object(repo_id: str, path: str) -> Config:
    """A JSON file of the cache as a dict, read no further than MAX_FILE_BYTES."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise HubError(f"{repo_id}: cannot read {name} in the cache: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise HubError(f"{repo_id}: {name} is larger than {MAX_FILE_BYTES} bytes")
    try:
        value: JSON = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HubError(f"{repo_id}: {name} is not JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(value, dict):
        raise HubError(f"{repo_id}: {name} holds no JSON object")
    return value


def _cached_tensors(repo_id: str, revision: str, files: list[str]) -> dict[str, int] | None:
    """dtype → number of elements over every tensor of the checkpoint, read from the headers of
    its safetensors files when every one of them is in the cache; None otherwise."""
    from huggingface_hub import try_to_load_from_cache

    if not files:
        return None
    counts: dict[str, int] = {}
    for name in files:
        path = try_to_load_from_cache(repo_id, name, revision=revision)
        if not isinstance(path, str):
            return None
        header = _header(path)
        if header is None:
            return None
        for key, info in header.items():
            if key == "__metadata__" or not isinstance(info, dict):
                continue
            shape, dtype = info.get("shape"), info.get("dtype")
            if not isinstance(shape, list) or not isinstance(dtype, str):
                return None
            n = 1
            for d in shape:
                if not isinstance(d, int) or d < 0:
                    return None
                n *= d
            counts[dtype] = counts.get(dtype, 0) + n
    return counts or None


def _header(path: str) -> dict[str, JSON] | None:
    """The JSON header of a safetensors file (an 8-byte little-endian length, then the header),
    without reading the weights; None when the file is not one."""
    try:
        with open(path, "rb") as fh:
            size = int.from_bytes(fh.read(8), "little")
            if not 2 <= size <= HEADER_BYTES:
                return None
            data = fh.read(size)
        value = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
