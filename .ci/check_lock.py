"""Fails when requirements.lock no longer matches pyproject.toml.

Every requirement of the project and of each extra must be pinned in the lock (``name==version``)
at a version its specifier admits. Transitive pins are whatever the refresh resolved; they are
not checked here (that would need a resolver and the network).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def locked_versions(lock: Path) -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for number, line in enumerate(lock.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if "==" not in line:
            sys.exit(f"{lock.name}:{number}: not a pin: {line!r}")
        name, version = line.split("==", 1)
        pins[canonicalize_name(name)] = Version(version)
    return pins


def declared_requirements(pyproject: Path) -> list[Requirement]:
    project = tomllib.loads(pyproject.read_text())["project"]
    lines = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        lines += extra
    own = canonicalize_name(project["name"])
    return [r for r in map(Requirement, lines) if canonicalize_name(r.name) != own]


def main() -> int:
    pins = locked_versions(ROOT / "requirements.lock")
    problems = []
    for req in declared_requirements(ROOT / "pyproject.toml"):
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None:
            problems.append(f"{req} is not in requirements.lock")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req} does not admit the locked {req.name}=={pinned}")
    for problem in problems:
        print(f"lock mismatch: {problem} (refresh: bash .ci/refresh-lock)", file=sys.stderr)
    if not problems:
        print(f"requirements.lock matches pyproject.toml ({len(pins)} pins)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
