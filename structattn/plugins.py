"""Plugins: user modules that register attention variants, structure providers or tasks, without editing
structattn.

Three ways in, one record format:

* ``--import MODULE_OR_FILE`` on any ``structattn`` command (repeatable): a module importable from the
  working folder or the installed packages, or a path to a ``.py`` file, imported under a stable name (the
  file's stem: ``plugins/my_variant.py`` -> ``my_variant``, the same name ``--import my_variant`` gives);
* ``import my_variant`` lines at the top of a gin config (resolved from the working folder too);
* entry points of installed packages in the group ``structattn.plugins``, loaded by every command.

Each load leaves a record ``{"module", "kind": "module" | "file" | "entry_point", "source", "path",
"sha256"}`` (:func:`loaded`); runs store them in their checkpoints and folders, and ``eval`` / ``merge`` /
``probe`` :func:`replay` them before rebuilding anything, so a checkpoint of a plugin variant evaluates from
any working folder.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterable, Sequence

ENTRY_POINT_GROUP = "structattn.plugins"
_LOADED: list[dict[str, Any]] = []


def loaded() -> list[dict[str, Any]]:
    """Records of every plugin loaded in this process, in load order (copies)."""
    return [dict(r) for r in _LOADED]


def working_folder_on_path() -> None:
    """Let imports see the working folder (the console script's ``sys.path`` does not hold it)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def sha256_of(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def module_name_for(path: str | Path) -> str:
    """The stable module name of a plugin file: its stem, made a valid identifier."""
    name = re.sub(r"\W", "_", Path(path).stem)
    return name if name and not name[0].isdigit() else f"_{name}"


def _is_file_spec(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or os.sep in spec


def _remember(record: dict[str, Any]) -> dict[str, Any]:
    if not any(r["module"] == record["module"] for r in _LOADED):
        _LOADED.append(record)
    return dict(record)


def _module_record(module: ModuleType, kind: str, source: str, **extra: Any) -> dict[str, Any]:
    path = getattr(module, "__file__", None)
    return {"module": module.__name__, "kind": kind, "source": source, **extra,
            "path": str(Path(path).resolve()) if path else None,
            "sha256": sha256_of(path) if path and Path(path).is_file() else None}


def import_file(path: str | Path, name: str | None = None) -> ModuleType:
    """Import the ``.py`` file at ``path`` as module ``name`` (default :func:`module_name_for`).

    Raises:
        ValueError: no such file, a different module of that name is already imported, or the file fails.
    """
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise ValueError(f"plugin file {str(path)!r} does not exist")
    name = name or module_name_for(path)
    existing = sys.modules.get(name)
    if existing is not None:
        if getattr(existing, "__file__", None) and Path(existing.__file__).resolve() == path:
            return existing
        raise ValueError(f"plugin file {str(path)!r} would be module {name!r}, but a module of that name is already "
                         f"imported from {getattr(existing, '__file__', None)!r}; rename the file")
    package = [str(path.parent)] if path.name == "__init__.py" else None  # a package's submodules stay importable
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=package)
    if spec is None or spec.loader is None:
        raise ValueError(f"plugin file {str(path)!r} cannot be imported (not a Python file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise ValueError(f"plugin file {str(path)!r} failed while importing: {type(err).__name__}: {err}") from err
    return module


def import_module(name: str, what: str = "plugin module") -> ModuleType:
    """Import ``name`` from the working folder or the installed packages, with a clear error."""
    working_folder_on_path()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and (name == err.name or name.startswith(err.name + ".")):
            raise ValueError(f"{what} {name!r} not found (looked in the working folder {os.getcwd()!r} and the "
                             "installed packages)") from None
        raise ValueError(f"{what} {name!r} failed while importing: {err}") from err
    except Exception as err:
        raise ValueError(f"{what} {name!r} failed while importing: {type(err).__name__}: {err}") from err


def load_plugins(specs: Iterable[str], source: str = "--import") -> list[dict[str, Any]]:
    """Import every spec (a module name or a ``.py`` path) and return their records."""
    records = []
    for spec in specs:
        if _is_file_spec(spec):
            module = import_file(spec)
            records.append(_remember(_module_record(module, "file", source)))
        else:
            records.append(_remember(_module_record(import_module(spec), "module", source)))
    return records


def load_entry_points(group: str = ENTRY_POINT_GROUP) -> list[dict[str, Any]]:
    """Load every installed entry point of ``group`` (each names a module or an object in one)."""
    records = []
    for point in importlib.metadata.entry_points(group=group):
        try:
            point.load()
        except Exception as err:
            dist = getattr(point.dist, "name", "?") if point.dist else "?"
            raise ValueError(f"entry point {point.name!r} ({point.value}) of package {dist!r} in group {group!r} "
                             f"failed to load: {type(err).__name__}: {err}") from err
        module = sys.modules[point.module]
        records.append(_remember(_module_record(module, "entry_point", f"entry point {point.name}")))
    return records


def record_imported(names: Sequence[str], source: str) -> list[dict[str, Any]]:
    """Record modules imported by someone else (gin's ``import`` lines)."""
    return [_remember(_module_record(sys.modules[n] if n in sys.modules else import_module(n), "module", source))
            for n in names]


def replay(records: Sequence[dict[str, Any]] | None, recorded_by: str = "the run") -> list[dict[str, Any]]:
    """Import the plugins a run recorded (:func:`loaded` of that run), before rebuilding its models.

    Files are imported from their recorded path under their recorded name; modules by name from the working
    folder or the installed packages, else (the run was made in another folder) from the file the record says
    they were loaded from. A file whose sha256 differs from the recorded one is still imported, with a one-line
    warning on stderr. Records without a path (older runs) replay by name only.

    Raises:
        ValueError: a plugin cannot be found, naming it, ``recorded_by`` and, when recorded, its file.
    """
    out = []
    for record in records or ():
        module, checked = _replay_one(record, recorded_by)
        now = _module_record(module, record.get("kind", "module"), f"replayed from {recorded_by}")
        if not checked:
            _warn_if_changed(record, now["path"], now["sha256"], recorded_by)
        out.append(_remember(now))
    return out


def _replay_one(record: dict[str, Any], recorded_by: str) -> tuple[ModuleType, bool]:
    """The recorded plugin's module, and whether its checksum was already compared (loaded from its path)."""
    name, path = record["module"], record.get("path")
    where = f" (file {path})" if record.get("kind") == "file" else ""
    who = f"plugin {name!r}{where}, recorded by {recorded_by}, cannot be imported"
    try:
        if record.get("kind") == "file" and name not in sys.modules and path and Path(path).is_file():
            return import_file(path, name), False
        if name in sys.modules or not path or _importable(name):
            return import_module(name), False
    except ValueError as err:
        raise ValueError(f"{who}: {err}") from None
    # not importable by name here (the run was made in another folder): the file the run loaded it from
    if not Path(path).is_file():
        same = _loaded_copy(record)
        if same is not None:  # --import of the same file under another name (moved and renamed): that module
            sys.modules[name] = same
            return same, True
        raise ValueError(f"{who}: no module {name!r} in the working folder {os.getcwd()!r} or the installed "
                         f"packages, and the recorded file {path!r} no longer exists; pass --import PATH (the "
                         f"plugin's file or module) to load it{_renamed_hint(record)}")
    if "." in name:
        raise ValueError(f"{who}: it is module {name!r} of package {name.split('.')[0]!r} (file {path!r}), which "
                         "is not importable from here; run from the folder that holds the package, add that "
                         "folder to PYTHONPATH, or pass --import PATH")
    _warn_if_changed(record, str(Path(path).resolve()), sha256_of(path), recorded_by)
    try:
        return import_file(path, name), True
    except ValueError as err:
        raise ValueError(f"{who}: {err}") from None


def _loaded_copy(record: dict[str, Any]) -> ModuleType | None:
    """A module loaded in this process (``--import``) from a file with the recorded sha256, if any."""
    for loaded_record in _LOADED:
        if record.get("sha256") and loaded_record.get("sha256") == record["sha256"]:
            module = sys.modules.get(loaded_record["module"])
            if module is not None:
                return module
    return None


def _renamed_hint(record: dict[str, Any]) -> str:
    """What to say when ``--import`` loaded other files than the recorded one (a renamed, since-edited copy)."""
    others = [r for r in _LOADED if r.get("path") and r["module"] != record["module"]]
    if not others:
        return ""
    shown = ", ".join(f"{r['module']!r} ({r['path']})" for r in others[:3])
    return (f"; this command imported {shown}, but not the recorded file (sha256 {str(record.get('sha256'))[:12]}): "
            f"to replay a changed copy, import it under the recorded name (a file named "
            f"{record['module'].split('.')[-1]}.py)")


def _importable(name: str) -> bool:
    """Whether ``name`` can be found from the working folder or the installed packages (without importing it;
    a parent package that fails to import counts as found, so that importing it reports the failure)."""
    working_folder_on_path()
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:
        return False
    except Exception:
        return True


def _warn_if_changed(record: dict[str, Any], path: str | None, digest: str | None, recorded_by: str) -> None:
    """One line on stderr when the plugin's file no longer has the sha256 the run recorded."""
    if record.get("sha256") and digest and digest != record["sha256"]:
        print(f"structattn: warning: plugin {record['module']!r} ({path}) changed since {recorded_by} recorded it "
              f"(sha256 {record['sha256'][:12]} then, {digest[:12]} now)", file=sys.stderr)
