"""Each instruction family is declared once, in the registry (lowlevel/emu/isa/registry.py),
and keeps to itself:

- every opcode has one row, declared by one family in that family's module, and every
  emitter the decoder can find is in its opcode's row; all the emitters of an opcode (every
  form) are defined in one module, so one file says how the opcode runs;
- a family's per-launch state has declared fields (__slots__), is made by the scheduler,
  and is touched only by that family's modules: no other module names its launch attribute,
  and no module of isa/ keeps state on the launch by other means (`C.__dict__`,
  `getattr(C, ...)`, or assigning a field the launch does not declare);
- the engine (decoder, scheduler, memory spaces, waits) and the tools (the time model) read
  the declarations: of isa/ they import the registry and the shared infrastructure
  (numerics, operands, addressing, and the decoder's fma and division helpers), no family.

The source checks read the modules' syntax trees (ast), so they name the file and line.
"""
import ast
import pathlib

import pytest

from lowlevel.emu.engine import decode
from lowlevel.emu.engine.memory import DeviceMemory
from lowlevel.emu.engine.scheduler import run_kernel
from lowlevel.emu.isa import registry
from lowlevel.emu.tools.base import Tool

ISA = pathlib.Path(registry.__file__).parent
EMU = ISA.parent
# isa/ modules that belong to no family: what every family and the decoder share
INFRASTRUCTURE = {"registry", "numerics", "operands", "addressing", "fma32", "divsqrt"}
READERS = sorted(str(p.relative_to(EMU)) for d in ("engine", "tools") for p in (EMU / d).glob("*.py"))
CONTEXT_NAMES = {"C", "launch"}          # what isa/ calls the launch in runtime helpers


def _modules():
    return sorted(p for p in ISA.glob("*.py") if p.name != "__init__.py")


def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _owner_of_module() -> dict[str, registry.Family]:
    owner = {}
    for fam in registry.FAMILIES.values():
        for module in (fam.module, *fam.parts):
            assert module not in owner, f"{module}.py is part of families {owner[module].name} and {fam.name}"
            owner[module] = fam
    return owner


def test_every_opcode_has_one_row_declared_by_one_family():
    declared = [op for fam in registry.FAMILIES.values() for op in fam.rows]
    assert len(declared) == len(set(declared)) == len(registry.OPCODES)
    for (opcode, form), emitter in registry.EMITTERS.items():
        row = registry.OPCODES[opcode]
        assert row.emitters[form] is emitter, f"{opcode} ({form or 'any form'}) is not in its row"
        assert row.family.rows[opcode] is row


def test_every_opcodes_emitters_are_defined_in_one_module():
    modules = {}
    for (opcode, form), emitter in registry.EMITTERS.items():
        modules.setdefault(opcode, {}).setdefault(emitter.__module__.rsplit(".", 1)[-1], []).append(form or "any")
    spread = {op: where for op, where in modules.items() if len(where) > 1}
    assert not spread, f"opcodes with emitters in several modules (form by module): {spread}"
    for opcode, where in modules.items():
        family = registry.OPCODES[opcode].family
        assert set(where) == {family.module}, \
            f"{opcode}'s emitters are in {', '.join(where)}.py, not its family's module {family.module}.py"


def test_rows_are_declared_in_their_familys_module():
    """`declare` is called only on a module's own FAMILY, made by `family(...)` there."""
    made_in = {fam.module: fam for fam in registry.FAMILIES.values()}
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "declare":
                where = f"{path.name}:{node.lineno}"
                assert isinstance(node.func.value, ast.Name) and node.func.value.id == "FAMILY", where
                assert path.stem in made_in, f"{where}: declares rows but makes no family"


def test_every_family_module_and_part_exists():
    for module in _owner_of_module():
        assert (ISA / f"{module}.py").is_file(), module


def _launch_fields() -> set[str]:
    """The fields a real launch declares (after its states are made), and its methods."""
    seen = {}

    class Capture(Tool):
        def initialize(self, launch):
            seen.update(vars(launch))
            seen.update(dict.fromkeys(dir(type(launch))))

    mod = decode.load_ptx(".version 8.0\n.target sm_90\n.address_size 64\n"
                          ".visible .entry k()\n{\n    ret;\n}\n")
    run_kernel(mod, "k", 1, 32, b"", DeviceMemory(1 << 20), tools=[Capture()])
    return set(seen) | {"stats"}


def _context_attribute(node) -> str | None:
    """`x` of `C.x` / `launch.x`, else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in CONTEXT_NAMES:
        return node.attr
    return None


def test_no_family_reads_another_familys_state():
    owner = _owner_of_module()
    state_of = {fam.state_attr: fam for fam in registry.FAMILIES.values() if fam.state is not None}
    users = {}
    for path in [*_modules(), *(EMU / r for r in READERS)]:
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Attribute) and node.attr in state_of:
                fam = state_of[node.attr]
                mine = owner.get(path.stem) is fam and path.parent == ISA
                assert mine, (f"{path.name}:{node.lineno} touches {node.attr}, the state of family "
                              f"{fam.name} ({fam.module}.py{' and ' if fam.parts else ''}"
                              f"{', '.join(p + '.py' for p in fam.parts)} only)")
                users.setdefault(fam.name, set()).add(path.stem)
    assert set(users) == {f.name for f in state_of.values()}, "a declared state nobody uses"


def test_no_state_kept_on_the_launch_by_other_means():
    fields = _launch_fields()
    for path in _modules():
        if path.stem == "registry":          # make_states: where the states are set
            continue
        for node in ast.walk(_tree(path)):
            where = f"{path.name}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Attribute) and node.attr == "__dict__":
                pytest.fail(f"{where}: reads an object's __dict__ (declare the field instead)")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("getattr", "setattr", "hasattr", "delattr") and node.args \
                    and isinstance(node.args[0], ast.Name) and node.args[0].id in CONTEXT_NAMES:
                pytest.fail(f"{where}: {node.func.id} on the launch (declare the field instead)")
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AugAssign) else []
            for target in targets:
                name = _context_attribute(target)
                assert name is None or name in fields, \
                    f"{where}: sets {name} on the launch, a field the launch does not declare"


def test_family_states_declare_their_fields():
    for fam in registry.FAMILIES.values():
        if fam.state is None:
            continue
        assert issubclass(fam.state, registry.LaunchState), fam.name
        assert "__slots__" in vars(fam.state), f"{fam.state.__qualname__} declares no __slots__"
        state = fam.state.__new__(fam.state)
        assert not hasattr(state, "__dict__"), f"{fam.state.__qualname__}: fields outside __slots__"


def test_the_engine_and_the_tools_import_no_family():
    assert "engine/decode.py" in READERS and "tools/timemodel.py" in READERS
    for reader in READERS:
        path = EMU / reader
        for node in ast.walk(_tree(path)):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level:
                parts = node.module.split(".")
                if parts[0] == "isa":
                    names = parts[1:2] or [a.name for a in node.names]
                elif node.module == "." and path.parent == ISA:
                    names = [a.name for a in node.names]
            for name in names:
                assert name in INFRASTRUCTURE, \
                    f"{reader}:{node.lineno} imports isa/{name}, not the registry (isa/registry.py)"
    families = {m for fam in registry.FAMILIES.values() for m in (fam.module, *fam.parts)}
    assert not INFRASTRUCTURE & families


def test_the_time_model_reads_the_pipe_classes_of_the_rows():
    from lowlevel.emu.ptx.ir import Instruction
    from lowlevel.emu.tools.timemodel import instruction_mix
    for row in registry.OPCODES.values():
        assert callable(row.pipe) or row.pipe in registry.PIPES, row.opcode

    def mix(text):
        opcode, *mods = text.split(".")
        return instruction_mix([Instruction(opcode, mods, [], 1, text, None)])

    assert mix("ld.global.v4.f32").global_bytes == 16         # MEMORY, global: its bytes
    assert mix("ld.shared.f32").integer == 1                  # MEMORY elsewhere: load/store unit
    assert mix("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32").tensor_flops == 2 * 16 * 8 * 16 / 32
    assert mix("sqrt.rn.f64").sfu == mix("div.approx.f32").sfu == 1
    assert mix("div.rn.f64").fp64 == mix("add.f16x2").fp32 == mix("mov.f32").integer == 1


def test_block_roles_come_from_the_rows():
    from lowlevel.emu.ptx.ir import Instruction, Reg
    role = registry.block_role
    assert role(Instruction("mbarrier", ["try_wait", "parity", "shared", "b64"], [], 1, "", None)).waits
    assert role(Instruction("bar", ["sync"], [], 1, "", None)).ends_block
    assert role(Instruction("barrier", ["cluster", "wait"], [], 1, "", None)).ends_block
    assert role(Instruction("shfl", ["sync", "bfly", "b32"], [], 1, "", None)).warp_sync == "data"
    assert role(Instruction("bar", ["warp", "sync"], [], 1, "", None)).warp_sync == "bar"
    red = role(Instruction("bar", ["red", "popc", "u32"], [Reg("%r1")], 1, "", None))
    assert red.ends_block and red.follows.opcode == "_bar_red_get"
    assert role(Instruction("add", ["s32"], [], 1, "", None)) == registry.BlockRole()


def test_every_wait_says_what_it_waits_for():
    """The deadlock report (engine/waits.py) names what each parked wait waits for from its
    row, so the engine holds no family's words: a waiting row must declare `stalls`."""
    silent = [row.opcode for row in registry.OPCODES.values() if row.waits and row.stalls == registry.Row.stalls]
    assert not silent, f"waiting rows without `stalls`: {silent}"
