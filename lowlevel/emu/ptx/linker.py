"""A PTX linker: several PTX modules -> one whole-program PTX module, as the driver's
cuLink* and nvJitLink link them, but at the PTX level (the emulated GPU runs PTX only).

Each input is cut into its module-scope statements (the header, `.file`, variables,
functions, entries, `.section`s), read with the front end's lexer. Linking them:
  - `.extern` declarations of functions and of .global/.const variables are resolved
    against another input's `.visible` (or `.weak`/`.common`) definition; a definition
    twice is refused when it is added, an extern nothing defines when the link completes.
    The system calls that ptxas itself provides (vprintf, malloc, free, __assertfail)
    stay extern; so do `.extern .shared` arrays (dynamic shared memory, not a symbol);
  - a symbol without linkage is private to its input: where its name is taken elsewhere,
    it is renamed (`name$in<N>`) in its own input;
  - `.file` numbers are renumbered so that each input's files keep their own (`.loc`
    and `inlined_at` follow); labels are each input's own as well. DWARF sections (-G)
    of several inputs cannot be concatenated: then they go, the `.loc` line table stays;
  - the output declares before use: the header (the newest `.version`, the highest
    `.target`), every `.file`, a prototype of every function, the variables (one that
    names another in its initializer after it), then the functions and entries in input
    order, then any `.section`.
The output is checked like any module afterwards (ptxas and the emulator's decoding),
so a call whose arguments do not fit the definition is refused there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import PtxError
from .lexer import Tok, strip_comments, tokenize

LINKAGES = (".visible", ".extern", ".weak", ".common")
SPACES = (".global", ".const", ".shared", ".tex", ".surfref", ".texref", ".samplerref", ".local")
SYSTEM_CALLS = {"vprintf", "malloc", "free", "__assertfail"}      # ptxas provides these


class LinkError(Exception):
    """The link is refused: `code_name` is the CUresult the driver returns, the message is
    its log line (naming the symbol and the inputs)."""

    def __init__(self, code_name: str, message: str):
        super().__init__(message)
        self.code_name = code_name


@dataclass
class Statement:
    """One module-scope statement of an input, as tokens (`first` to `last`, inclusive)."""
    kind: str                    # "file", "var", "func", "entry", "section", "pragma"
    first: int
    last: int
    name: str = ""
    linkage: str | None = None
    defines: bool = True         # a definition (a body, or a variable that is not .extern)
    space: str = ""              # of a variable: ".global", ".shared", ...
    signature_end: int = 0       # of a function: the token that closes its parameters


@dataclass
class Input:
    name: str
    text: str                    # comments blanked (token positions index it)
    toks: list[Tok]
    version: tuple[int, int]
    target: list[str]            # ["sm_90", "texmode_unified", ...]
    statements: list[Statement] = field(default_factory=list)
    renames: dict[str, str] = field(default_factory=dict)
    file_offset: int = 0
    debug_dropped: bool = False  # its DWARF sections are not in the output


def _error(name: str, e: PtxError) -> LinkError:
    return LinkError("CUDA_ERROR_INVALID_PTX", f"ptxas (emulated) error   : {name}, line {e.line}; {e.message}")


def read_input(text: str, name: str) -> Input:
    """Cut one PTX module into its module-scope statements; refuses what cannot be cut."""
    try:
        toks = tokenize(text)
        return _Cutter(text, toks, name).cut()
    except PtxError as e:
        raise _error(name, e) from None


class _Cutter:
    def __init__(self, text: str, toks: list[Tok], name: str):
        self.toks, self.i = toks, 0
        self.input = Input(name, strip_comments(text), toks, (0, 0), [])

    def cut(self) -> Input:
        toks, inp = self.toks, self.input
        while toks[self.i].kind != "eof":
            t = toks[self.i]
            if t.text == ".version":
                m = re.fullmatch(r"(\d+)\.(\d+)", toks[self.i + 1].text)
                if not m:
                    raise PtxError(t.line, f"bad .version {toks[self.i + 1].text!r}")
                inp.version = (int(m[1]), int(m[2]))
                self.i += 2
            elif t.text == ".target":
                self.i += 1
                inp.target = [toks[self.i].text]
                while toks[self.i + 1].text == ",":
                    self.i += 2
                    inp.target.append(toks[self.i].text)
                self.i += 1
            elif t.text == ".address_size":
                if toks[self.i + 1].text != "64":
                    raise PtxError(t.line, f".address_size {toks[self.i + 1].text} is not supported (only 64)")
                self.i += 2
            elif t.text == ".file":
                inp.statements.append(self.line_statement("file"))
            elif t.text in (".section", ".pragma"):
                inp.statements.append(self.to_end(t.text[1:]))
            else:
                inp.statements.append(self.declaration())
        if not inp.version or not inp.target:
            raise PtxError(1, "missing .version or .target directive")
        return inp

    def line_statement(self, kind: str) -> Statement:
        first, line = self.i, self.toks[self.i].line
        while self.toks[self.i + 1].kind != "eof" and self.toks[self.i + 1].line == line:
            self.i += 1
        self.i += 1
        return Statement(kind, first, self.i - 1)

    def to_end(self, kind: str, ends=(";", "}")) -> Statement:
        """A statement from here to the first of `ends` outside brackets (a variable's ends at
        the `;` after its initializer's braces, a function's at the brace closing its body)."""
        first, depth = self.i, 0
        while True:
            t = self.toks[self.i]
            if t.kind == "eof":
                raise PtxError(self.toks[first].line, f"unterminated {self.toks[first].text}")
            depth += {"{": 1, "}": -1, "(": 1, ")": -1}.get(t.text, 0)
            self.i += 1
            if depth == 0 and t.text in ends:
                return Statement(kind, first, self.i - 1)

    def declaration(self) -> Statement:
        toks, first = self.toks, self.i
        linkage = None
        while toks[self.i].text in LINKAGES:
            linkage = toks[self.i].text
            self.i += 1
        head = toks[self.i]
        if head.text in (".func", ".entry"):
            return self.function(first, linkage, head.text[1:])
        if head.text not in SPACES:
            raise PtxError(head.line, f"unexpected {head.text!r} at module scope")
        name = next((t.text for t in toks[self.i:] if t.kind == "ident" or t.text == ";"), ";")
        if name == ";":
            raise PtxError(head.line, "a variable without a name")
        self.i = first
        statement = self.to_end("var", ends=(";",))
        statement.name, statement.linkage, statement.space = name, linkage, head.text
        statement.defines = linkage != ".extern"
        return statement

    def function(self, first: int, linkage: str | None, kind: str) -> Statement:
        toks = self.toks
        self.i += 1
        if toks[self.i].text == "(":               # a .func's return parameters
            self.skip_parens()
        if toks[self.i].kind != "ident":
            raise PtxError(toks[self.i].line, f"expected a function name, found {toks[self.i].text!r}")
        name = toks[self.i].text
        self.i += 1
        signature_end = self.i - 1
        if toks[self.i].text == "(":
            self.skip_parens()
            signature_end = self.i - 1
        while toks[self.i].text not in ("{", ";"):   # .maxntid 256, 1, 1 / .noreturn / .pragma "..."
            if toks[self.i].kind == "eof":
                raise PtxError(toks[first].line, f"unterminated declaration of {name!r}")
            self.i += 1
        defines = toks[self.i].text == "{"
        if defines:
            self.i = first
            statement = self.to_end(kind)
        else:
            statement = Statement(kind, first, self.i)
            self.i += 1
        statement.name, statement.linkage, statement.defines = name, linkage, defines
        statement.signature_end = signature_end
        return statement

    def skip_parens(self) -> None:
        depth = 0
        while True:
            t = self.toks[self.i]
            if t.kind == "eof":
                raise PtxError(t.line, "unbalanced parentheses")
            depth += {"(": 1, ")": -1}.get(t.text, 0)
            self.i += 1
            if depth == 0:
                return


# ---- linking --------------------------------------------------------------------------------
def _exported(st: Statement) -> bool:
    """A definition other inputs may link against: an entry, or linkage .visible/.weak/.common."""
    return st.defines and st.kind in ("func", "entry", "var") and (st.kind == "entry" or st.linkage is not None)


def _is_extern_symbol(st: Statement) -> bool:
    """A declaration that must be resolved: an .extern function or .global/.const variable
    (an .extern .shared array is dynamic shared memory, no symbol)."""
    return not st.defines and st.linkage == ".extern" and (st.kind == "func" or st.space in (".global", ".const"))


def _strong(st: Statement) -> bool:
    return st.linkage not in (".weak", ".common")


class Linker:
    """Inputs added one by one (a definition twice is refused at once); `complete()` gives
    the linked module's text."""

    def __init__(self):
        self.inputs: list[Input] = []
        self.defined: dict[str, tuple[int, Statement]] = {}     # exported name -> its definition

    def add(self, text: str, name: str) -> None:
        index = len(self.inputs)
        inp = read_input(text, name)
        for st in inp.statements:
            if not _exported(st):
                continue
            known = self.defined.get(st.name)
            if known is None or (_strong(st) and not _strong(known[1])):
                self.defined[st.name] = (index, st)
            elif _strong(st) and _strong(known[1]):
                first = self.inputs[known[0]].name if known[0] < index else name
                raise LinkError("CUDA_ERROR_INVALID_SOURCE",
                                f"error   : Multiple definition of '{st.name}' in '{name}', first defined in '{first}'")
        self.inputs.append(inp)

    def complete(self) -> str:
        if not self.inputs:
            raise LinkError("CUDA_ERROR_INVALID_VALUE", "error   : no input to link")
        self._resolve()
        self._rename_private_symbols()
        offset = 0
        several_debug = sum(any(st.kind == "section" for st in inp.statements) for inp in self.inputs) > 1
        for inp in self.inputs:
            inp.debug_dropped = several_debug
            inp.file_offset = offset
            numbers = [int(inp.toks[st.first + 1].text) for st in inp.statements
                       if st.kind == "file" and inp.toks[st.first + 1].kind == "int"]
            offset += max(numbers, default=0)
        return self._emit()

    def _resolve(self) -> None:
        """Every extern names a definition of its kind; refuses the first that does not."""
        for inp in self.inputs:
            for st in inp.statements:
                if not _is_extern_symbol(st) or st.name in SYSTEM_CALLS:
                    continue
                found = self.defined.get(st.name)
                if found is None:
                    raise LinkError("CUDA_ERROR_UNKNOWN", f"error   : Undefined reference to '{st.name}' in '{inp.name}'")
                definition = found[1]
                if (definition.kind == "var") != (st.kind == "var") or definition.space != st.space:
                    raise LinkError("CUDA_ERROR_INVALID_SOURCE",
                                    f"error   : Memory space doesn't match for '{st.name}' in '{inp.name}', first "
                                    f"specified in '{self.inputs[found[0]].name}'")

    def _rename_private_symbols(self) -> None:
        """A symbol without linkage belongs to its input, and so do its labels (the debug
        sections name the functions' labels): renamed where the name is taken elsewhere."""
        names = [{st.name for st in inp.statements if st.name} | _labels(inp) for inp in self.inputs]
        for index, inp in enumerate(self.inputs):
            private = {st.name for st in inp.statements if st.name and st.kind != "entry" and st.linkage is None}
            private |= _labels(inp)
            others = set().union(*(n for i, n in enumerate(names) if i != index))
            inp.renames = {name: f"{name}$in{index}" for name in private & others}

    def _kept(self, index: int, st: Statement) -> bool:
        """Whether a definition goes into the output (a weak one that lost does not)."""
        return not _exported(st) or self.defined.get(st.name) == (index, st)

    def _emit(self) -> str:
        out = [_header(self.inputs)]
        out += [_render(inp, st.first, st.last) for inp in self.inputs for st in inp.statements if st.kind == "file"]
        externs: dict[str, str] = {}          # the system calls and dynamic shared arrays, once each
        for inp in self.inputs:
            for st in inp.statements:
                keep = (st.kind == "func" and st.name in SYSTEM_CALLS) or st.space == ".shared"
                if not st.defines and keep:
                    externs.setdefault(st.name, _render(inp, st.first, st.last))
        out += externs.values()
        out += [_prototype(inp, st) for i, inp in enumerate(self.inputs) for st in inp.statements
                if st.kind == "func" and st.defines and self._kept(i, st)]
        out += self._variables()
        out += [_render(inp, st.first, st.last) for i, inp in enumerate(self.inputs) for st in inp.statements
                if (st.kind in ("func", "entry") and st.defines and self._kept(i, st)) or st.kind == "pragma"]
        # DWARF sections are one compile unit each: concatenated they are not valid DWARF
        # (ptxas: "overlapping non-identical data"), so where several inputs have them, the
        # debug information goes; the .loc line table stays.
        with_debug = [inp for inp in self.inputs if any(st.kind == "section" for st in inp.statements)]
        if len(with_debug) == 1:
            out += [_render(with_debug[0], st.first, st.last) for st in with_debug[0].statements if st.kind == "section"]
        return "\n\n".join(out) + "\n"

    def _variables(self) -> list[str]:
        """The variable definitions, each after those its initializer names."""
        chosen = {}
        for i, inp in enumerate(self.inputs):
            for st in inp.statements:
                if st.kind == "var" and st.defines and self._kept(i, st):
                    chosen[inp.renames.get(st.name, st.name)] = (inp, st)
        done: list[str] = []
        placed: set[str] = set()

        def place(name: str, path: tuple) -> None:
            if name in placed or name in path:
                return
            inp, st = chosen[name]
            for t in inp.toks[st.first:st.last + 1]:
                used = inp.renames.get(t.text, t.text)
                if t.kind == "ident" and used in chosen and used != name:
                    place(used, (*path, name))
            placed.add(name)
            done.append(_render(inp, st.first, st.last))
        for name in chosen:
            place(name, ())
        return done


def _labels(inp: Input) -> set[str]:
    """The labels an input defines (`name:`), in its functions and in its debug sections."""
    toks = inp.toks
    return {t.text for t, after in zip(toks, toks[1:]) if t.kind == "ident" and after.text == ":"}


def _render(inp: Input, first: int, last: int) -> str:
    """The text of tokens first..last of an input, with its renames and file numbers applied."""
    toks, out = inp.toks, []
    pos = toks[first].pos
    k = first
    while k <= last:
        t = toks[k]
        out.append(inp.text[pos:t.pos])
        text = t.text
        if inp.debug_dropped and toks[k - 1].text == ".loc" and t.kind == "int":
            # `.loc file line column`, without the `function_name`/`inlined_at` that name the
            # dropped debug sections' labels
            end = min(k + 2, last)
            while end + 1 <= last and toks[end + 1].line == t.line and toks[end + 1].kind == "int":
                end += 1
            text = " ".join([str(int(toks[k].text) + inp.file_offset), *(x.text for x in toks[k + 1:end + 1])])
            out.append(text)
            pos = toks[end].pos + len(toks[end].text)
            k = end + 1
            while k <= last and toks[k].line == t.line and toks[k].text != ";":
                pos = toks[k].pos + len(toks[k].text)
                k += 1
            continue
        if t.kind == "ident":
            text = inp.renames.get(text, text)
        elif t.kind == "int" and k > 0 and toks[k - 1].text in (".file", ".loc", "inlined_at"):
            text = str(int(text.rstrip("U")) + inp.file_offset)
        out.append(text)
        pos = t.pos + len(t.text)
        k += 1
    return "".join(out).strip()


def _prototype(inp: Input, st: Statement) -> str:
    """A function's declaration (its signature), so that any use may come before its body."""
    k, noreturn = st.signature_end + 1, False
    while inp.toks[k].text not in ("{", ";"):       # the directives between the signature and the body
        noreturn |= inp.toks[k].text == ".noreturn"
        k += 1
    return _render(inp, st.first, st.signature_end) + (" .noreturn" if noreturn else "") + ";"


def _header(inputs: list[Input]) -> str:
    """The newest .version, the highest .target (its suffix kept) with every input's options."""
    version = max(inp.version for inp in inputs)

    def rank(target: str) -> tuple:
        m = re.fullmatch(r"(?:sm|compute)_(\d+)([af]?)", target)
        return (int(m[1]), m[2] != "") if m else (0, False)
    target = max((inp.target[0] for inp in inputs), key=rank)
    options = []
    for inp in inputs:           # `debug` asks for DWARF sections, which go where several inputs had them
        options += [o for o in inp.target[1:] if o not in options and not (o == "debug" and inp.debug_dropped)]
    return f".version {version[0]}.{version[1]}\n.target {', '.join([target, *options])}\n.address_size 64"


def link(inputs: list[tuple[str, str]]) -> str:
    """The linked text of (PTX text, name) inputs; raises LinkError."""
    linker = Linker()
    for text, name in inputs:
        linker.add(text, name)
    return linker.complete()
