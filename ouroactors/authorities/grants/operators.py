"""Operator identities the grants authority can verify.

``<data_dir>/operators.json`` maps operator names to the SHA-256 of their token; the local
operator's own credentials live in ``<data_dir>/operator.token`` (``name:token``). Both files are
created with mode 0600 and refused if group or others can read them. The CLI presents the token;
the authority checks its digest. A name a request merely asserts proves nothing.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path

from ...core.errors import OuroactorsError

OPERATORS_FILE = "operators.json"
TOKEN_FILE = "operator.token"


class CredentialsError(OuroactorsError):
    pass


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _read_private(path: Path) -> str:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialsError(f"{path} is readable by others (mode {oct(mode & 0o777)}); chmod 600 it")
    return path.read_text()


# the same rules for other credential files of the data dir (e.g. the coordinator's principals.json)
write_private_text = _write_private


def ensure_local_operator(data_dir: str | os.PathLike[str], name: str | None = None) -> str:
    """Create the local operator's credentials on first use; return its name."""
    directory = Path(data_dir)
    directory.mkdir(parents=True, exist_ok=True)
    token_path = directory / TOKEN_FILE
    if token_path.exists():
        return read_credentials(directory)[0]
    name = name or getpass.getuser()
    token = secrets.token_urlsafe(32)
    operators = load_operators(directory) if (directory / OPERATORS_FILE).exists() else {}
    operators[name] = hashlib.sha256(token.encode()).hexdigest()
    tmp = directory / f".{OPERATORS_FILE}.tmp-{os.getpid()}"
    _write_private(tmp, json.dumps(operators, indent=2))
    os.replace(tmp, directory / OPERATORS_FILE)
    _write_private(token_path, f"{name}:{token}\n")
    return name


def load_operators(data_dir: str | os.PathLike[str]) -> dict[str, str]:
    return load_digests(Path(data_dir) / OPERATORS_FILE)


def load_digests(path: Path) -> dict[str, str]:
    """A private ``{name: sha256 of token}`` file (empty when there is none); :class:`CredentialsError` if it is
    readable by others or malformed. Shared by every credential file of the data dir."""
    try:
        data = json.loads(_read_private(path))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise CredentialsError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise CredentialsError(f"{path}: expected an object of name -> sha256")
    return data


def read_credentials(data_dir: str | os.PathLike[str]) -> tuple[str, str]:
    path = Path(data_dir) / TOKEN_FILE
    try:
        name, sep, token = _read_private(path).strip().partition(":")
    except FileNotFoundError:
        raise CredentialsError(f"no operator credentials at {path}") from None
    if not sep or not name or not token:
        raise CredentialsError(f"{path}: expected NAME:TOKEN")
    return name, token


def verify(operators: dict[str, str], name: str, token: str) -> bool:
    expected = operators.get(name)
    if expected is None:
        return False
    return hmac.compare_digest(expected, hashlib.sha256(token.encode()).hexdigest())
