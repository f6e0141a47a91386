"""PTX text -> tokens, and the token stream the parser's readers share."""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import PtxError

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<fhex>0[fF][0-9a-fA-F]{8}(?![\w$]))
  | (?P<dhex>0[dD][0-9a-fA-F]{16}(?![\w$]))
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>0[xX][0-9a-fA-F]+U?|0[bB][01]+U?|\d+U?)
  | (?P<ident>[%A-Za-z_$][\w$]*(?:\.[\w$]+(?:::[\w$]+)*)*)
  | (?P<directive>\.[A-Za-z_][\w$]*(?:::[\w$]+)*)
  | (?P<punct>[{}()\[\],;:@!|+\-<>=])
""", re.VERBOSE)


@dataclass
class Tok:
    kind: str
    text: str
    line: int
    pos: int



def strip_comments(src: str) -> str:
    """Blank out // and /* */ comments, keeping newlines so line numbers stay right."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = src.find('"', i + 1)
            j = n - 1 if j < 0 else j
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            if j < 0:
                raise PtxError(src.count("\n", 0, i) + 1, "unterminated /* comment")
            out.append(re.sub(r"[^\n]", " ", src[i:j + 2]))
            i = j + 2
        else:
            j = i
            while j < n and src[j] not in '"/':
                j += 1
            if j == i:          # a lone '/'
                j = i + 1
            out.append(src[i:j])
            i = j
    return "".join(out)


def tokenize(src: str) -> list[Tok]:
    src = strip_comments(src)
    _refuse_non_ascii(src)
    toks = []
    pos, line = 0, 1
    n = len(src)
    while pos < n:
        m = _TOKEN.match(src, pos)
        if not m:
            raise PtxError(line, f"unexpected character {src[pos]!r}")
        kind = m.lastgroup
        text = m.group()
        if kind == "ws":
            line += text.count("\n")
        else:
            toks.append(Tok(kind, text, line, pos))
        pos = m.end()
    toks.append(Tok("eof", "", line, n))
    return toks


def _refuse_non_ascii(src: str) -> None:
    """ptxas takes any bytes inside comments (invalid UTF-8 too) and refuses anything but
    ASCII elsewhere, string literals included ("Unexpected non-ASCII character"). `src`
    has its comments blanked; bytes that were not UTF-8 arrive as U+FFFD or as lone
    surrogates, both non-ASCII."""
    if src.isascii():
        return
    pos = next(i for i, c in enumerate(src) if ord(c) > 127)
    raise PtxError(src.count("\n", 0, pos) + 1,
                   f"unexpected non-ASCII character {src[pos]!r} (outside comments PTX is ASCII)")



def parse_int(text: str) -> int:
    t = text.rstrip("U")
    if t[:2] in ("0x", "0X"):
        return int(t[2:], 16)
    if t[:2] in ("0b", "0B"):
        return int(t[2:], 2)
    if len(t) > 1 and t[0] == "0":
        return int(t, 8)
    return int(t)



class TokenStream:
    """A cursor over the tokens of one PTX text, with the small reads every reader uses."""

    def __init__(self, src: str):
        self.src = strip_comments(src)
        self.toks = tokenize(src)
        self.i = 0

    @property
    def tok(self) -> Tok:
        return self.toks[self.i]

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, text: str) -> bool:
        return self.tok.text == text

    def accept(self, text: str) -> bool:
        if self.tok.text == text:
            self.i += 1
            return True
        return False

    def expect(self, text: str, what: str = "") -> Tok:
        t = self.tok
        if t.text != text:
            found = repr(t.text) if t.kind != "eof" else "end of file"
            raise PtxError(t.line, f"expected {text!r}{' ' + what if what else ''}, found {found}")
        self.i += 1
        return t

    def expect_kind(self, kind: str, what: str) -> Tok:
        t = self.tok
        if t.kind != kind:
            found = repr(t.text) if t.kind != "eof" else "end of file"
            raise PtxError(t.line, f"expected {what}, found {found}")
        self.i += 1
        return t

    def int_literal(self, what: str = "integer") -> int:
        neg = self.accept("-")
        t = self.expect_kind("int", what)
        v = parse_int(t.text)
        return -v if neg else v

    def skip_line(self, line: int) -> None:
        """Skip the remaining tokens of a line-oriented directive (.loc, .file)."""
        while self.tok.kind != "eof" and self.tok.line == line and self.tok.text not in ";":
            self.i += 1
        self.accept(";")
