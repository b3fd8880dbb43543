"""The package's layout shows its architecture (docs/architecture.md): no loose module
at the top of lnorm/ beyond its face, and imports that point one way, read from the
source with ast (function-level imports included)."""

from __future__ import annotations

import ast
import pathlib

import pytest

LNORM = pathlib.Path(__file__).resolve().parent.parent / "lnorm"

#: The package's face: what may stand at the top of lnorm/ beside the subpackages.
FACE = {"__init__", "__main__", "cli", "config", "errors", "progress"}


def imported_modules(path: pathlib.Path) -> set[str]:
  """Every absolute module a file imports, and ``module.name`` for each name taken
  from one (``from lnorm import cli`` imports ``lnorm.cli``)."""
  names = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      names.add(node.module)
      names.update(f"{node.module}.{alias.name}" for alias in node.names)
  return names


def subpackage_files(name: str) -> list[pathlib.Path]:
  return sorted((LNORM / name).rglob("*.py"))


def library_subpackages() -> list[str]:
  return sorted(p.name for p in LNORM.iterdir()
                if p.is_dir() and (p / "__init__.py").exists() and p.name != "commands")


def violations(files, forbidden: tuple[str, ...]) -> list[str]:
  return [f"{path} imports {name}"
          for path in files for name in sorted(imported_modules(path))
          if any(name == f or name.startswith(f + ".") for f in forbidden)]


def test_the_top_of_lnorm_holds_only_the_face():
  loose = {p.stem for p in LNORM.glob("*.py")}
  assert loose - FACE == set(), ("a loose module at the top of lnorm/: put it in the "
                                 "subpackage whose job it does (docs/architecture.md)")


def test_every_subpackage_says_what_it_holds():
  for name in library_subpackages() + ["commands"]:
    assert ast.get_docstring(ast.parse((LNORM / name / "__init__.py").read_text())), name


@pytest.mark.parametrize("name", library_subpackages())
def test_no_library_subpackage_imports_the_commands_or_the_experiments(name):
  assert violations(subpackage_files(name), ("lnorm.commands", "experiments")) == []


def test_training_imports_neither_the_analysis_nor_the_sweeps():
  assert violations(subpackage_files("training"), ("lnorm.analysis", "lnorm.sweeps")) == []


def test_the_checks_see_imports_inside_functions(tmp_path):
  # The rules above would pass vacuously if the parser missed a kind of import.
  module = tmp_path / "m.py"
  module.write_text("import os\nimport lnorm.training\n\ndef f():\n"
                    "  from lnorm.commands import train\n  import experiments.draw.task\n"
                    "  from lnorm import sweeps\n")
  assert violations([module], ("lnorm.commands", "experiments", "lnorm.sweeps")) == [
      f"{module} imports {name}" for name in (
          "experiments.draw.task", "lnorm.commands", "lnorm.commands.train", "lnorm.sweeps")]
  assert violations([module], ("lnorm.train",)) == []  # A prefix of a name is no match.
