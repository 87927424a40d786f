"""User-controlled text (stored names, URL values) shown as text on every page.

Streamlit renders markdown in ``st.markdown``, captions, alerts, subheaders, metric and
widget labels: a host named ``**bold** $x$ :red[red] [click](...)`` would show bold, as
LaTeX, in red and as a link. ``md`` backslash-escapes every ASCII punctuation character
(CommonMark lets any of them be escaped; an escaped ``$``, ``:`` or ``[`` starts no math,
colour directive or link), keeps a bare address from being linked and puts a newline's
paragraph break back on one line; ``name`` also shortens what only the screen shows (tables
keep the whole text).
"""

from __future__ import annotations

import html
import math
import re

_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")  # every ASCII punctuation character
_BREAKS = re.compile(r"[\r\n\t\v\f\x85\u2028\u2029]+")
# GitHub-flavoured Markdown links a bare http://, www. or e-mail address after parsing (an
# escape does not stop it): an invisible word joiner (U+2060) after the scheme or "@" does
_LINKISH = re.compile(r"(?i)\b(https?|ftp|www)(?=\\[:.])")
_JOINER = "\u2060"
SCREEN_CHARS = 80  # a name longer than this is shortened in sentences, never in tables


def md(text: object) -> str:
    """``text`` as literal markdown text, on one line."""
    escaped = _PUNCTUATION.sub(r"\\\1", _BREAKS.sub(" ", str(text)))
    return _LINKISH.sub(r"\1" + _JOINER, escaped).replace("\\@", "\\@" + _JOINER)


def short(text: object, limit: int = SCREEN_CHARS) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis (for the screen only)."""
    s = str(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def name(text: object, limit: int = SCREEN_CHARS) -> str:
    """A stored name or a URL value inside a sentence: shortened, then escaped."""
    return md(short(text, limit))


def number_in(value: object, low: float, high: float) -> float | None:
    """A number a URL gave, when it is finite and within [low, high]; else None (the page
    then says the value is not available, as for any other it does not offer)."""
    try:
        x = float(str(value))
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and low <= x <= high else None


def label(text: object, limit: int = SCREEN_CHARS) -> str:
    """A name as a chart label: Plotly draws ``<b>``, ``<a href>`` and entities in labels and
    hover text, so ``<``, ``>`` and ``&`` are written as entities; shortened."""
    return html.escape(short(text, limit), quote=False)
