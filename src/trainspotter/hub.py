"""Names as the Hugging Face hub gives them: ``ORG/NAME`` with an optional ``@REVISION`` (a branch,
a tag or a commit), resolved to one snapshot of the local hub cache by ``huggingface_hub`` exactly as
transformers and datasets resolve them (``HF_HOME``/``HF_HUB_CACHE``; ``refs/<branch>`` names the
commit). Downloads happen only where the environment allows them (never with ``HF_HUB_OFFLINE=1``,
as in the tests); a name the cache lacks is then one ``InputError`` naming the id, the cache and the
command that fetches it. What an audit keeps is the resolved **commit**: a branch that moved is
another snapshot, never a silent cache hit."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from trainspotter.errors import InputError

__all__ = ["HUB_ID", "Snapshot", "cache_dir", "is_hub_id", "offline", "resolve_snapshot", "split_revision"]

# ORG/NAME as the hub allows them (letters, digits, '-', '_', '.'; no '--' or '..'; at most 96 characters)
HUB_ID = re.compile(r"(?!.*(?:--|\.\.))[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


@dataclass(frozen=True)
class Snapshot:
    """One resolved snapshot: what was asked (``repo_id``, ``revision``: None for the default
    branch) and what it resolved to (``commit``: 40 hex digits; ``path``: the snapshot folder)."""

    repo_type: str
    repo_id: str
    revision: str | None
    commit: str
    path: Path

    @property
    def name(self) -> str:
        """``ORG/NAME@COMMIT``: the snapshot, whatever revision named it."""
        return f"{self.repo_id}@{self.commit}"


def split_revision(value: str) -> tuple[str, str | None]:
    """``"ORG/NAME@REV"`` → ``("ORG/NAME", "REV")``; without ``@``: revision None."""
    name, at, revision = value.partition("@")
    return name, (revision or None) if at else None


def is_hub_id(value: str) -> bool:
    """Whether ``value`` (without its ``@REVISION``) reads as a hub id and names no local path
    (a folder ``models/x`` here is the folder, as transformers reads it)."""
    name, _ = split_revision(value)
    return bool(HUB_ID.fullmatch(name)) and not Path(name).exists()


def cache_dir() -> Path:
    """The hub cache as huggingface_hub finds it now: ``HF_HUB_CACHE``, else ``HF_HOME``/hub, else
    ``~/.cache/huggingface/hub`` (read at each call, so a changed environment is followed)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")) / "huggingface"
    return Path(home).expanduser() / "hub"


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set to a true value: the cache only."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def resolve_snapshot(repo_id: str, revision: str | None = None, repo_type: str = "model",
                     allow_patterns: list[str] | None = None, where: str = "") -> Snapshot:
    """The snapshot of ``repo_id`` at ``revision`` (None: the default branch) in the hub cache,
    fetched first (only the files ``allow_patterns`` names) where downloads are allowed. InputError,
    prefixed by ``where``, for an id the cache lacks offline, an unknown repository or revision, or
    a failed download."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError, HFValidationError, LocalEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    asked = f"{repo_id}@{revision}" if revision else repo_id
    fetch = f"hf download {repo_id}" + (f" --revision {revision}" if revision else "") + \
        (f" --repo-type {repo_type}" if repo_type != "model" else "")
    cache = cache_dir()
    try:
        path = Path(snapshot_download(repo_id, repo_type=repo_type, revision=revision, cache_dir=cache,
                                      local_files_only=offline(), allow_patterns=allow_patterns))
    except LocalEntryNotFoundError:
        why = "downloads are off (HF_HUB_OFFLINE=1)" if offline() else "the hub cannot be reached"
        raise InputError(f"{where}{asked}: not in the Hugging Face cache {cache} and {why}; fetch it where the "
                         f"hub can be reached (`{fetch}`), or set HF_HOME to a cache that holds it") from None
    except GatedRepoError:
        raise InputError(f"{where}{asked}: a gated repository; accept its terms on the hub and log in "
                         f"(`hf auth login`), then `{fetch}`") from None
    except RevisionNotFoundError:
        raise InputError(f"{where}{asked}: the hub has no revision {revision!r} of {repo_id}") from None
    except RepositoryNotFoundError:
        raise InputError(f"{where}{asked}: no such {repo_type} repository on the hub (or it is private: "
                         f"log in with `hf auth login`)") from None
    except HFValidationError as e:
        raise InputError(f"{where}{asked}: not a hub id ({str(e).splitlines()[0]})") from None
    except (HfHubHTTPError, OSError) as e:
        raise InputError(f"{where}{asked}: could not be fetched ({type(e).__name__}: {str(e).splitlines()[0]})") \
            from None
    return Snapshot(repo_type, repo_id, revision, path.name, path)
