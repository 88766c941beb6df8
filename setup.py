"""Build hook: ship the repository root's workspace.yaml and dagster.yaml in the wheel.

They stay at the root, one copy in git, where ``dagster dev`` and every Dagster user look for
them; the wheel carries them as ``infra_rag_assets/data/`` files so an installed package runs
from any directory (``package_data.py`` finds either place). Everything else is in pyproject.toml.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT_FILES = ("workspace.yaml", "dagster.yaml")


class BuildPy(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "infra_rag_assets" / "data"
        self.mkpath(str(target))
        for name in ROOT_FILES:
            self.copy_file(name, str(target / name))


setup(cmdclass={"build_py": BuildPy})
