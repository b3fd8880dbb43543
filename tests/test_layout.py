"""The package's layout shows its architecture (docs/architecture.md): no loose module
at the top of lnorm/ beyond its face, every module listed in the document, and
imports that point the way the document's table says, read from the source with ast
(imports inside functions included)."""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
LNORM = REPO / "lnorm"
ARCHITECTURE = REPO / "docs" / "architecture.md"

#: The package's face: what may stand at the top of lnorm/ beside the subpackages.
FACE = {"__init__", "__main__", "cli", "config", "errors", "progress"}
#: The face modules any package may import (the table's header says so).
IMPORTABLE_FROM_ANYWHERE = {"config", "errors", "progress"}


def is_module(dotted: str, root: pathlib.Path = REPO) -> bool:
  path = root.joinpath(*dotted.split("."))
  return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported_modules(path: pathlib.Path, root: pathlib.Path = REPO) -> set[str]:
  """Every absolute module a file imports, at module level or inside a function.
  ``from a import b`` imports ``a.b`` where that is a module (``from lnorm import
  cli``), else ``a`` (``from lnorm.training.defaults import is_complete``); a relative
  import is resolved against the file's package."""
  package = path.relative_to(root).with_suffix("").parts[:-1]
  names = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      names.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
      module = ".".join(p for p in (base, node.module or "") if p)
      for alias in node.names:
        child = f"{module}.{alias.name}"
        names.add(child if is_module(child, root) else module)
  return names


def owner(dotted: str) -> str | None:
  """The table's row a module belongs to: ``lnorm.training.loop`` -> ``training``,
  ``lnorm.cli`` -> ``cli``, ``experiments.draw.task`` -> ``experiments``; None for
  anything outside lnorm and the experiments (or ``lnorm`` itself)."""
  parts = dotted.split(".")
  if parts[0] == "experiments":
    return "experiments"
  if parts[0] != "lnorm" or len(parts) == 1:
    return None
  return parts[1]


def row_files(row: str, root: pathlib.Path = REPO) -> list[pathlib.Path]:
  if row == "experiments":
    return sorted((root / "experiments").rglob("*.py"))
  folder = root / "lnorm" / row
  return sorted(folder.rglob("*.py")) if folder.is_dir() else [folder.with_suffix(".py")]


def _table(text: str, heading: str) -> list[list[str]]:
  """The rows of the first table under ``## heading``, each a list of its cells."""
  section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
  rows = [line for line in section.splitlines() if line.startswith("|")]
  return [[c.strip() for c in r.strip("|").split("|")] for r in rows[2:]]


def import_table(text: str | None = None) -> dict[str, set[str]]:
  """docs/architecture.md's table: package -> the lnorm modules it may import."""
  text = ARCHITECTURE.read_text() if text is None else text
  return {row[0].strip("`"): set(re.findall(r"`([\w.]+)`", row[1]))
          for row in _table(text, "The direction of imports")}


def listed_modules(text: str | None = None) -> set[str]:
  """Every ``path.py`` the document's 'Every module' section names."""
  text = ARCHITECTURE.read_text() if text is None else text
  section = text.split("## Every module\n", 1)[1].split("\n## ", 1)[0]
  return set(re.findall(r"^\| `([\w/]+\.py)` \|", section, re.M))


def forbidden_imports(row: str, allowed: set[str], root: pathlib.Path = REPO) -> list[str]:
  """``path imports name`` for every lnorm or experiments module a row's files import
  beyond their own package, the face modules anyone may import, and ``allowed``."""
  bad = []
  for path in row_files(row, root):
    for name in sorted(imported_modules(path, root)):
      target = owner(name)
      if target is None or target == row or target in IMPORTABLE_FROM_ANYWHERE:
        continue
      inside = name.split(".", 1)[1] if target != "experiments" else name
      if not any(inside == a or inside.startswith(a + ".") for a in allowed):
        bad.append(f"{path.relative_to(root)} imports {name}")
  return bad


def library_subpackages() -> list[str]:
  return sorted(p.name for p in LNORM.iterdir()
                if p.is_dir() and (p / "__init__.py").exists() and p.name != "commands")


def test_the_top_of_lnorm_holds_only_the_face():
  loose = {p.stem for p in LNORM.glob("*.py")}
  assert loose - FACE == set(), ("a loose module at the top of lnorm/: put it in the "
                                 "subpackage whose job it does (docs/architecture.md)")


def test_every_subpackage_says_what_it_holds():
  for name in library_subpackages() + ["commands"]:
    assert ast.get_docstring(ast.parse((LNORM / name / "__init__.py").read_text())), name


def test_the_document_lists_every_module_and_no_other():
  modules = {str(p.relative_to(LNORM)) for p in LNORM.rglob("*.py")}
  listed = listed_modules()
  assert modules - listed == set(), (
      "modules docs/architecture.md does not list: add a line for each under "
      "'Every module'")
  assert listed - modules == set(), "docs/architecture.md lists modules that are gone"


def test_the_table_has_a_row_for_every_package_and_face_module():
  rows = set(import_table())
  assert rows == set(library_subpackages()) | {"commands", "experiments"} | FACE


@pytest.mark.parametrize("row", sorted(import_table()))
def test_a_package_imports_only_what_its_row_allows(row):
  assert forbidden_imports(row, import_table()[row]) == [], (
      f"an import docs/architecture.md's table does not allow for {row}: move the code, "
      f"or, if the direction is right, add it to the row and say why")


@pytest.mark.parametrize("row", sorted(import_table()))
def test_a_row_allows_nothing_its_package_does_not_import(row):
  # The table states what the code does: an allowance nothing uses is a stale line.
  imported = {name.split(".", 1)[1] if owner(name) != "experiments" else name
              for path in row_files(row) for name in imported_modules(path)
              if owner(name) not in (None, row)}
  unused = {a for a in import_table()[row]
            if not any(i == a or i.startswith(a + ".") for i in imported)}
  assert unused == set(), f"{row}'s row allows imports nothing of it makes: {unused}"


def test_no_library_package_imports_the_commands_or_the_experiments():
  for row, allowed in import_table().items():
    if row not in ("commands", "experiments", "cli", "__main__"):
      assert not {"commands", "experiments"} & {a.split(".")[0] for a in allowed}, row
  assert "analysis" not in import_table()["training"]
  assert "sweeps" not in import_table()["training"]


EXPERIMENTS_DIR = REPO / "experiments"


def registry() -> dict[str, str]:
  """lnorm/training/experiments.py's list, read as the library reads it."""
  from lnorm.training.experiments import EXPERIMENTS  # pylint: disable=g-import-not-at-top
  return EXPERIMENTS


def test_every_registered_experiment_is_a_folder_with_its_task_and_spec():
  # The registry's line and the folder are an experiment (docs/extending.md); a folder
  # the registry does not list would be run by nothing.
  folders = {p.name for p in EXPERIMENTS_DIR.iterdir() if (p / "__init__.py").exists()}
  assert folders == set(registry())
  for name, package in registry().items():
    assert package == f"experiments.{name}", name
    for part in ("task", "spec"):
      assert (EXPERIMENTS_DIR / name / f"{part}.py").exists(), f"{name}: no {part}.py"


def test_a_spec_imports_only_the_types_it_is_made_of():
  # The analysis reads every spec to list the suite, a report or a figure: a spec that
  # imported its task (JAX, the model, the data) would make each of them pay for it.
  for path in sorted(EXPERIMENTS_DIR.glob("*/spec.py")):
    ours = {n for n in imported_modules(path) if owner(n) is not None}
    assert ours <= {"lnorm.analysis.specs", "lnorm.analysis.rule"}, (path, ours)


def test_the_library_names_an_experiments_module_only_in_the_registry():
  # The library imports an experiment by its name, through the registry's
  # ``module(name, part)``: a module path written anywhere else is a second list.
  for path in sorted(LNORM.rglob("*.py")):
    if path == LNORM / "training" / "experiments.py":
      continue
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
      if isinstance(node, ast.Constant) and isinstance(node.value, str):
        assert not re.match(r"experiments\.\w", node.value), (path, node.value)


def test_the_checks_see_every_kind_of_import(tmp_path):
  # The rules above would pass vacuously if the parser missed a kind of import.
  package = tmp_path / "lnorm" / "data"
  package.mkdir(parents=True)
  for folder in ("lnorm", "lnorm/data", "lnorm/analysis", "lnorm/commands"):
    (tmp_path / folder).mkdir(exist_ok=True)
    (tmp_path / folder / "__init__.py").write_text("")
  (tmp_path / "lnorm" / "analysis" / "runs.py").write_text("")
  (tmp_path / "lnorm" / "commands" / "train.py").write_text("")
  (tmp_path / "lnorm" / "errors.py").write_text("")
  (package / "core.py").write_text(
      "import os\nfrom lnorm import errors\nfrom . import other\n\ndef f():\n"
      "  from lnorm.commands import train\n  import experiments.draw.task\n"
      "  from ..analysis import runs\n  from lnorm.analysis.runs import x\n")
  assert forbidden_imports("data", set(), tmp_path) == [
      f"lnorm/data/core.py imports {name}" for name in (
          "experiments.draw.task", "lnorm.analysis.runs", "lnorm.commands.train")]
  assert forbidden_imports("data", {"analysis.runs", "commands", "experiments"},
                           tmp_path) == []
  # A prefix of a name is no match.
  assert forbidden_imports("data", {"analysis.run", "command", "experiments"},
                           tmp_path) == [
      f"lnorm/data/core.py imports {name}" for name in (
          "lnorm.analysis.runs", "lnorm.commands.train")]


def test_the_tables_are_read_from_the_document():
  text = ("## Every module\n\n| module | what |\n| --- | --- |\n| `a.py` | x |\n"
          "| `b/c.py` | y |\n\n## The direction of imports\n\n| package | may import |\n"
          "| --- | --- |\n| `sweeps` | `analysis`, `training.defaults` |\n"
          "| `data` | (nothing) |\n")
  assert listed_modules(text) == {"a.py", "b/c.py"}
  assert import_table(text) == {"sweeps": {"analysis", "training.defaults"}, "data": set()}
