"""Credentials in store URLs and messages: never shown, never stored.

:func:`redact_url` is the one function that masks: every store URL, command line or store
message that is shown or stored goes through it. Pure text (the standard library only), so
that what only masks a message loads no database code.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Callable
from urllib.parse import parse_qsl, quote, quote_plus, unquote, unquote_plus

MASK = "***"
"""What a masked password or secret reads as (SQLAlchemy's ``hide_password`` spelling)."""

SECRET_KEY_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "api_key",
    "access_key",
    "private_key",
    "credential",
)
"""A query or connection-string key holding any of these (case-insensitive, ``-`` read as
``_``) is a secret: ``password``, ``sslpassword``, ``client_secret``, ``access_token``..."""
SECRET_KEYS = ("pwd", "pw", "pass", "sig")
"""Keys that are secrets only when they are the whole key (``pwd=``, SAS ``sig=``)."""

MIN_LITERAL = 4
"""Known secrets this long or longer are also masked wherever they stand alone in a text
(a driver's message); shorter ones would mask ordinary words and give themselves away."""

# The patterns start only where a word starts (lookbehind) and passwords are found by
# position (_passwords): linear time on long texts.
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://")
_USER = re.compile(r"[^\s:/]*")
"""A URL's user name: up to ``:`` (then a password follows) or ``/`` (then none does); it
may hold ``@``, as SQLAlchemy reads it."""
_URL_ENDS = re.compile(r"[\s\"'<>`]")
"""What ends a URL in a text (a password holds none of these)."""
_KEY = re.compile(
    r"(?<![\w.\-])(?:(?P<q>[\"'])(?P<qkey>[\w.\-]+)(?P=q)\s*:|(?P<key>[\w.\-]+)\s*=)\s*"
)
"""``KEY=`` in a query string or a libpq/ODBC connection string, ``"KEY":`` in JSON or a
Python dict; what follows is masked where KEY is a secret (:func:`_secret_key`)."""
_VALUE = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^\s&;]*[^\s&;:,.)\]}'\"]")
"""A value: quoted, or bare up to a blank, ``&`` or ``;`` (punctuation that ends a sentence
or a label, ``URL: message``, stays)."""


def _secret_key(key: str) -> bool:
    name = key.lower().replace("-", "_")
    return name in SECRET_KEYS or any(part in name for part in SECRET_KEY_PARTS)


def _variants(secret: str) -> set[str]:
    """A secret as it may be written: as is, decoded, percent-encoded."""
    forms = (unquote, unquote_plus, lambda s: quote(s, safe=""), lambda s: quote_plus(s, safe=""))
    return {secret, *(form(secret) for form in forms)}


_SQLALCHEMY_URL = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:
            (?P<username>[^:/]*)
            (?::(?P<password>[^@]*))?
        @)?
        (?:
            (?:
                \[(?P<ipv6host>[^/\?]+)\] |
                (?P<ipv4host>[^/:\?]+)
            )?
            (?::(?P<port>[^/\?]*))?
        )?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
        """,
    re.X,
)
"""SQLAlchemy's pattern of a URL (``sqlalchemy.engine.url._parse_url``): the password and
query that :func:`_read_as_sqlalchemy` finds are those SQLAlchemy would connect with."""


def _read_as_sqlalchemy(text: str) -> set[str]:
    """The password and the values of secret query keys of ``text`` as ``sa.make_url``
    reads them (nothing when it would refuse the URL: no match, a port not a number)."""
    found = _SQLALCHEMY_URL.match(text)
    if found is None:
        return set()
    port = found["port"]
    if port:
        try:
            int(port)
        except ValueError:
            return set()
    secrets = {unquote(found["password"])} if found["password"] else set()
    for name, value in parse_qsl(found["query"] or ""):
        if _secret_key(name):
            secrets.add(value)
    return secrets


def _url_secrets(store: str | os.PathLike[str] | None) -> set[str]:
    """The password and secret query values of a store URL (nothing for paths); the
    password as written up to the URL's last ``@`` too (:func:`_passwords`)."""
    text = "" if store is None else os.fspath(store).strip()
    if not _SCHEME.match(text):
        return set()
    found = {text[start:end] for start, end in _passwords(text)}
    # SQLAlchemy splits a password holding '@' (and ':'): a driver may quote each piece
    found |= {piece for raw in found for piece in re.split("[@:]", raw)}
    found |= _read_as_sqlalchemy(text)
    return {variant for secret in found if secret for variant in _variants(str(secret))}


def _unquoted(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def redact_url(text: str, store: str | os.PathLike[str] | None = None) -> str:
    """``text`` with every credential in it masked as ``***``: the password of each URL
    (``scheme://user:PASSWORD@host``; the user name stays), the values of password-like
    keys (:data:`SECRET_KEY_PARTS`, :data:`SECRET_KEYS`) in query strings, connection
    strings and JSON, and the secrets of ``store`` (a store path or URL) or of ``text``
    itself when it is one URL, wherever they stand alone in the text (at least
    :data:`MIN_LITERAL` characters). Paths and URLs without credentials are unchanged.

    The one function that masks: every store URL, command line or store message that is
    shown or stored goes through it.
    """
    secrets = _url_secrets(store)
    if not re.search(r"\s", text.strip()):  # one URL (in a longer text, SQLAlchemy would
        secrets |= _url_secrets(text)  # read a password into ``host:1/db or x@y``)
    found = [text[start:end] for start, end in _passwords(text) + _keyed_values(text)]
    for raw in found:
        if raw != MASK:
            secrets |= _variants(raw) | _variants(_unquoted(raw))
    # Known secrets first, whole (a bare value's end is a guess), then what looks like one.
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= MIN_LITERAL and secret != MASK:
            alone = rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])"
            text = re.sub(alone, MASK, text)
    return _mask(_mask(text, _passwords), _keyed_values)


def _mask(text: str, spans: Callable[[str], list[tuple[int, int]]]) -> str:
    parts, done = [], 0
    for start, end in spans(text):
        parts += [text[done:start], MASK]
        done = end
    return "".join([*parts, text[done:]])


def _passwords(text: str) -> list[tuple[int, int]]:
    """Where the passwords of URLs are in ``text``: ``scheme://user:PASSWORD@``, PASSWORD
    up to the LAST ``@`` of the URL (a blank or a quote ends it), so that a password
    holding an unencoded ``@`` is masked whole (SQLAlchemy would split it at the first).
    Linear in the length of ``text``."""
    ends = [m.start() for m in _URL_ENDS.finditer(text)]
    ats = [m.start() for m in re.finditer("@", text)]
    spans: list[tuple[int, int]] = []
    for scheme in _SCHEME.finditer(text):
        user = _USER.match(text, scheme.end())
        colon = scheme.end() if user is None else user.end()
        if text[colon : colon + 1] != ":" or (spans and colon < spans[-1][1]):
            continue
        end_at = bisect.bisect_right(ends, colon)
        end = ends[end_at] if end_at < len(ends) else len(text)
        last = bisect.bisect_left(ats, end) - 1
        if last >= 0 and ats[last] > colon + 1:
            spans.append((colon + 1, ats[last]))
    return spans


def _keyed_values(text: str) -> list[tuple[int, int]]:
    """Where the values of secret keys are in ``text`` (a key inside one is not read: the
    value of any other key is, a URL's query in ``--ortperf-store=URL``)."""
    spans: list[tuple[int, int]] = []
    for key in _KEY.finditer(text):
        if (spans and key.start() < spans[-1][1]) or not _secret_key(key["key"] or key["qkey"]):
            continue
        value = _VALUE.match(text, key.end())
        if value is not None:
            spans.append(value.span())
    return spans
