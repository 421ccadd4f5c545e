"""What keeps the serverless engine's stores private: the state store's credentials and the
secret under which everything read back from a store is authenticated.

Every other local user is taken for hostile. A pool's embedded Valkey server has a random
password (and a Unix socket in a directory only its user can enter); a server of the
user's is used with the password the user gives. A payload that is unpickled after it
crossed a process boundary (a task's error in the run's record, a run's task source, a
pickled value in the object store) carries a MAC: HMAC-SHA256 under the pool's *secret*,
over the name it is stored under and its bytes, so a payload copied to another name or
another run does not verify either. Nothing is unpickled before its MAC is checked (in
constant time); a payload that fails is an :class:`IntegrityError` naming the key and the
store, never executed. Whoever holds the password but not the secret can disturb a run
(delete its keys), not run code in its processes.

:class:`Credentials` travels the way the server's address does, never on a command line
(where ``ps`` shows it to every user): in a worker's environment (``TILEGRAPH_REDIS_PASSWORD``,
``TILEGRAPH_REDIS_USERNAME``, ``TILEGRAPH_SECRET``, the secret in hex), or in a file only
its owner may read (``TILEGRAPH_CREDENTIALS=path``, ``tilegraph worker --credentials path``,
written by :meth:`Credentials.write`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

SECRET_ENV = "TILEGRAPH_SECRET"
PASSWORD_ENV = "TILEGRAPH_REDIS_PASSWORD"
USERNAME_ENV = "TILEGRAPH_REDIS_USERNAME"
CREDENTIALS_ENV = "TILEGRAPH_CREDENTIALS"
TAG_BYTES = 32  # an HMAC-SHA256 tag
MIN_SECRET_BYTES = 16


class IntegrityError(ValueError):
    """A payload read back from a store failed verification (no MAC, or a MAC that is not
    the one the pool's secret gives): it was not written by a holder of the secret, or not
    under this name, and is not used."""


def new_secret() -> bytes:
    """A random MAC secret (32 bytes)."""
    return secrets.token_bytes(32)


def new_password() -> str:
    """A random password for an embedded server (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def secret_value(value: Any, where: str) -> bytes:
    """A MAC secret from bytes or a hex string, at least 16 bytes."""
    if isinstance(value, str):
        try:
            value = bytes.fromhex(value.strip())
        except ValueError:
            raise ValueError(f"{where}: the secret must be hex digits, got a string that is "
                             "not") from None
    if not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{where}: the secret must be bytes or a hex string, got "
                        f"{type(value).__name__}")
    if len(value) < MIN_SECRET_BYTES:
        raise ValueError(f"{where}: the secret must be at least {MIN_SECRET_BYTES} bytes, got "
                         f"{len(value)}")
    return bytes(value)


class Credentials:
    """The state store's ``username`` and ``password`` (``None``: none) and the MAC
    ``secret`` (bytes; ``None`` where it is not known yet). Never shown by ``repr``."""

    __slots__ = ("password", "secret", "username")

    def __init__(self, password: str | None = None, secret: bytes | str | None = None, *,
                 username: str | None = None):
        for name, value in (("password", password), ("username", username)):
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"Credentials: {name} must be a non-empty string or None")
        object.__setattr__(self, "password", password)
        object.__setattr__(self, "username", username)
        object.__setattr__(self, "secret", None if secret is None
                           else secret_value(secret, "Credentials"))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Credentials are read-only")

    def __repr__(self) -> str:
        return (f"Credentials(username={self.username!r}, password="
                f"{'<hidden>' if self.password else None}, secret="
                f"{'<hidden>' if self.secret else None})")

    def __eq__(self, other: object) -> bool:
        return type(other) is Credentials and (self.username, self.password, self.secret) == \
            (other.username, other.password, other.secret)

    __hash__ = None  # type: ignore[assignment]

    def with_secret(self, secret: bytes) -> Credentials:
        return Credentials(self.password, secret, username=self.username)

    def env(self) -> dict[str, str]:
        """The environment variables that hand these credentials to another process."""
        out = {}
        if self.username:
            out[USERNAME_ENV] = self.username
        if self.password:
            out[PASSWORD_ENV] = self.password
        if self.secret:
            out[SECRET_ENV] = self.secret.hex()
        return out

    def to_dict(self) -> dict[str, str | None]:
        return {"username": self.username, "password": self.password,
                "secret": self.secret.hex() if self.secret else None}

    def write(self, path: str | os.PathLike) -> str:
        """Write the credentials to a new file ``path`` that only its owner may read
        (mode 0600; an existing file is refused); returns the path."""
        path = os.fspath(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_dict(), f)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> Credentials:
        """The credentials in the file ``path`` (written by :meth:`write`); a file that
        other users may read or write is refused, naming the path and its mode."""
        path = os.fspath(path)
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot read the credentials file {path}: "
                                     f"{exc.strerror}") from exc
        with os.fdopen(fd) as f:
            st = os.fstat(f.fileno())
            if st.st_mode & 0o077 or (hasattr(os, "geteuid") and st.st_uid != os.geteuid()):
                raise PermissionError(
                    f"the credentials file {path} has mode {stat.S_IMODE(st.st_mode):04o} "
                    f"(owner uid {st.st_uid}): other users may read or change it; it must be "
                    "yours with mode 0600 (chmod 600)")
            try:
                data = json.load(f)
            except ValueError as exc:
                raise ValueError(f"the credentials file {path} is not JSON: {exc}") from None
        if not isinstance(data, dict) or set(data) - {"username", "password", "secret"}:
            raise ValueError(f"the credentials file {path} must hold a JSON object with the "
                             "keys username, password and secret")
        secret = data.get("secret")
        return cls(data.get("password") or None,
                   secret_value(secret, f"credentials file {path}") if secret else None,
                   username=data.get("username") or None)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Credentials:
        """The credentials of this process's environment: the file named by
        ``TILEGRAPH_CREDENTIALS`` if set, else ``TILEGRAPH_REDIS_PASSWORD``,
        ``TILEGRAPH_REDIS_USERNAME`` and ``TILEGRAPH_SECRET``."""
        env = os.environ if environ is None else environ
        path = env.get(CREDENTIALS_ENV)
        if path:
            return cls.load(path)
        secret = env.get(SECRET_ENV)
        return cls(env.get(PASSWORD_ENV) or None,
                   secret_value(secret, SECRET_ENV) if secret else None,
                   username=env.get(USERNAME_ENV) or None)


def split_url(url: str) -> tuple[str, str | None, str | None]:
    """``(url without its user and password, username, password)`` of a Redis URL (the
    URL is what may be shown and passed on; the password never is)."""
    parts = urlsplit(url)
    if parts.password is None and parts.username is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port is not None else "")
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment)), \
        user or None, password or None


def as_credentials(given: Credentials | str | os.PathLike | None) -> Credentials:
    """``given`` as :class:`Credentials`: as it is, read from a credentials file (a path),
    or none (``None``)."""
    if given is None:
        return Credentials()
    if isinstance(given, Credentials):
        return given
    if isinstance(given, (str, os.PathLike)):
        return Credentials.load(given)
    raise TypeError(f"credentials must be a Credentials or the path of a credentials file, "
                    f"got {type(given).__name__}")


def credentials_for(url: str, given: Credentials | str | os.PathLike | None = None, *,
                    environ: Mapping[str, str] | None = None) -> tuple[str, Credentials]:
    """``(url without credentials, credentials)`` for a server the user names: the
    credentials given (a :class:`Credentials`, or the path of a credentials file), else
    the URL's user and password with the environment's secret, else the environment's
    (:meth:`Credentials.from_env`). A password both in the URL and given elsewhere must be
    the same."""
    bare, user, password = split_url(url)
    creds = Credentials.from_env(environ) if given is None else as_credentials(given)
    if password is not None:
        if creds.password is not None and creds.password != password and given is not None:
            raise ValueError(f"the Redis URL {bare} has a password and the credentials "
                             "given have another one")
        creds = Credentials(password, creds.secret, username=user or creds.username)
    elif user is not None:  # the URL's user, with the password given elsewhere
        creds = Credentials(creds.password, creds.secret, username=user)
    return bare, creds


class Signer:
    """MACs under one secret: HMAC-SHA256 over a label, the name a payload is stored under
    and the payload's parts (hashlib releases the GIL on large buffers)."""

    __slots__ = ("_key",)

    def __init__(self, secret: bytes):
        self._key = secret_value(secret, "Signer")

    def __repr__(self) -> str:
        return "Signer(<secret hidden>)"

    def tag(self, label: bytes, name: str, *parts: Any) -> bytes:
        h = hmac.new(self._key, label + b"\0" + name.encode() + b"\0", hashlib.sha256)
        for p in parts:
            h.update(p)
        return h.digest()

    def seal(self, label: bytes, name: str, payload: bytes) -> bytes:
        """``payload`` with its tag in front."""
        return self.tag(label, name, payload) + payload

    def open(self, label: bytes, name: str, sealed: bytes | memoryview, where: str
             ) -> memoryview:
        """The payload of :meth:`seal`'s output after its tag is checked; else
        :class:`IntegrityError` naming ``where``."""
        view = memoryview(sealed)
        if len(view) < TAG_BYTES:
            raise IntegrityError(f"{where} carries no MAC: it was not written by tilegraph "
                                 "with this pool's secret, and is not unpickled")
        self.check(label, name, bytes(view[:TAG_BYTES]), where, view[TAG_BYTES:])
        return view[TAG_BYTES:]

    def check(self, label: bytes, name: str, tag: bytes, where: str, *parts: Any) -> None:
        if not hmac.compare_digest(self.tag(label, name, *parts), tag):
            raise IntegrityError(
                f"{where} failed verification: its MAC does not match the pool's secret "
                "(written by someone without the secret, changed since, or moved from "
                "another key); it is not used")
