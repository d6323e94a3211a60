"""Text shown to people: control characters escaped (:func:`escape_control`), "did you
mean" hints for unknown names, and machine classes in words and by prefix.

A leaf module (standard library only).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def escape_control(text: str) -> str:
    """``text`` with every character Python's ``repr`` would escape shown as its escape
    (``\\x1b``, ``\\n``, ``\\x00``, ``\\u202e``...): control, format and separator
    characters, so that a test id or measurement name printed to a terminal can neither
    send escape sequences nor break a line. Printable characters, letters of any script
    and backslashes are kept as they are (pytest's ids already spell escapes so)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def did_you_mean(unknown: Iterable[object], known: Iterable[object]) -> str:
    """``"; did you mean 'budget'?"`` for names close to known ones (case ignored), else
    ``""``: appended to a message that lists the unknown and the known names."""
    by_lower: dict[str, str] = {}
    for name in known:
        by_lower.setdefault(str(name).lower(), str(name))
    names = [str(u) for u in unknown]
    hints = []
    for name in names:
        close = difflib.get_close_matches(name.lower(), list(by_lower), n=1)
        if close and by_lower[close[0]] != name:
            match = by_lower[close[0]]
            hints.append(f"{match!r}" if len(names) == 1 else f"{match!r} for {name!r}")
    return f"; did you mean {', '.join(hints)}?" if hints else ""


def machine_label(fingerprint: str | None, cpu_model: str | None, cores: int | None) -> str:
    """A machine class in words: ``"Intel Xeon 8375C, 2 CPUs [3f9c01a2b4de]"``.

    The machine class is the hardware hash of :func:`pytest_ortperf.machine.machine_fingerprint`
    (the ``fingerprint`` column of the store); the model and core count make it readable."""
    parts = [str(cpu_model).strip() if cpu_model else "unknown CPU"]
    if cores:
        parts.append(f"{int(cores)} CPU" + ("" if int(cores) == 1 else "s"))
    return ", ".join(parts) + f" [{fingerprint or 'no fingerprint'}]"


def match_machine(prefix: str, known: Iterable[str]) -> str:
    """The one machine class of ``known`` that ``prefix`` starts (case ignored); a
    ValueError listing them when none or several match."""
    text = prefix.strip().lower()
    classes = sorted({str(k) for k in known if k})
    found = [k for k in classes if k.lower().startswith(text)] if text else []
    if len(found) == 1:
        return found[0]
    why = "matches several" if found else "matches none"
    listed = ", ".join(found or classes) or "none: no runs stored yet"
    raise ValueError(
        f"machine class {prefix!r} {why} of the stored machine classes ({listed}; "
        "`ortperf machines` describes them)"
    )
