"""A wheelhouse made from the installed environment, so that pip installs offline.

pre-commit installs a ``language: python`` hook by ``pip install .`` in a fresh
virtualenv, with its dependencies. For a test to do that without a network, pip
gets ``PIP_NO_INDEX=1`` and ``PIP_FIND_LINKS`` naming a folder of wheels built here:
each distribution ctxcli needs (its requirements and theirs, as installed now) is
packed back into a wheel from the files its ``RECORD`` lists, and the build backend
(setuptools, which ``pip install .`` builds ctxcli with) comes from virtualenv's own
bundled wheels.
"""

from __future__ import annotations

import base64
import hashlib
import re
import shutil
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

#: Files pip writes when it installs a wheel; a wheel never holds them.
_INSTALLED_ONLY = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def closure(requirements: list[str]) -> list[metadata.Distribution]:
    """The installed distributions that ``requirements`` (PEP 508 strings) need, with
    theirs at any depth, without extras."""
    environment = dict(default_environment(), extra="")
    seen: dict[str, metadata.Distribution] = {}
    todo = list(requirements)
    while todo:
        requirement = Requirement(todo.pop())
        key = canonicalize_name(requirement.name)
        if key in seen or (requirement.marker and not requirement.marker.evaluate(environment)):
            continue
        seen[key] = metadata.distribution(key)
        todo += seen[key].requires or []
    return list(seen.values())


def repack(dist: metadata.Distribution, folder: Path) -> Path:
    """Write ``dist``'s installed files back into a wheel in ``folder``."""
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
    info = f"{name}-{dist.version}.dist-info"
    target = folder / f"{name}-{dist.version}-{_tag(dist)}.whl"
    base = Path(str(dist.locate_file("")))
    record = []
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for file in dist.files or []:
            parts = Path(file).parts
            if ".." in parts or "__pycache__" in parts or file.name in _INSTALLED_ONLY:
                continue
            data = (base / file).read_bytes()
            arcname = Path(file).as_posix()
            if arcname.startswith(f"{parts[0]}/") and parts[0].endswith(".dist-info"):
                arcname = f"{info}/{Path(*parts[1:]).as_posix()}"
            wheel.writestr(arcname, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{arcname},sha256={digest.decode()},{len(data)}")
        record.append(f"{info}/RECORD,,")
        wheel.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return target


def _tag(dist: metadata.Distribution) -> str:
    """The wheel's tag set from its ``WHEEL`` file (``py3-none-any`` without one)."""
    text = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")]
    if not tags:
        return "py3-none-any"
    parts = [sorted({tag.split("-")[i] for tag in tags}) for i in range(3)]
    return "-".join(".".join(p) for p in parts)


def build(folder: Path, requirements: list[str]) -> Path:
    """A wheelhouse in ``folder`` for ``pip install .`` of a project that needs
    ``requirements``: their installed distributions and virtualenv's bundled
    setuptools."""
    from virtualenv.seed.wheels.embed import BUNDLE_FOLDER

    folder.mkdir(parents=True, exist_ok=True)
    for dist in closure(requirements):
        repack(dist, folder)
    for bundled in Path(BUNDLE_FOLDER).glob("setuptools-*.whl"):
        shutil.copy(bundled, folder)
    return folder
