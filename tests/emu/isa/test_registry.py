"""The one instruction registry (lowlevel/emu/isa/registry.py): one row per opcode, declared
by one family, its emitters by form; each opcode declared once (so no declaration can depend
on the order the families are imported in), looked up by the instruction's own forms first."""
import pytest

from lowlevel.emu.isa import addmul, bits, compare, convert, cvt, registry
from lowlevel.emu.ptx.ir import Imm, Instruction, Reg, Sym


def ins(text: str, operands) -> Instruction:
    opcode, *mods = text.split(".")
    return Instruction(opcode, mods, operands, 1, text, None)


@pytest.mark.parametrize("text, operands, emitter", [
    ("add.u32", [Reg("%r1"), Reg("%r2"), Imm(1)], addmul.emit_int_or_float_binary),
    ("add.f16", [Reg("%h1"), Reg("%h2"), Reg("%h3")], addmul.emit_half),
    ("add.bf16x2", [Reg("%r1"), Reg("%r2"), Reg("%r3")], addmul.emit_half),
    ("add.cc.u32", [Reg("%r1"), Reg("%r2"), Reg("%r3")], addmul.emit_carry),
    ("add.cc.f16", [Reg("%h1"), Reg("%h2"), Reg("%h3")], addmul.emit_half),     # refuses .cc by name
    ("addc.u32", [Reg("%r1"), Reg("%r2"), Reg("%r3")], addmul.emit_carry),
    ("mad.cc.lo.u32", [Reg("%r1"), Reg("%r2"), Reg("%r3"), Reg("%r4")], addmul.emit_carry),
    ("setp.lt.f16", [Reg("%p1"), Reg("%h1"), Reg("%h2")], compare.emit_setp_half),
    ("cvt.f32.bf16", [Reg("%f1"), Reg("%h1")], cvt.emit_cvt_half),
    ("cvt.f32.s32", [Reg("%f1"), Reg("%r1")], cvt.emit_cvt),
    ("mov.u64", [Reg("%rd1"), Sym("buffer")], convert.emit_mov_address),
    ("mov.u64", [Reg("%rd1"), Reg("%rd2")], convert.emit_mov),
    ("popc.b32", [Reg("%r1"), Reg("%r2")], bits.emit_popc_clz_brev),
])
def test_lookup_takes_the_instructions_own_form_first(text, operands, emitter):
    assert registry.lookup(ins(text, operands)) is emitter


def test_an_opcode_no_family_knows_has_no_emitter():
    assert registry.lookup(ins("tex.2d.v4.f32.f32", [Reg("%f1")])) is None


def test_an_opcode_declared_twice_is_an_error():
    fam = registry.Family("test_family", "test_registry")
    with pytest.raises(RuntimeError, match="opcode add declared twice: by family addmul and family test_family"):
        fam.declare("add", emit=lambda g, i: None, forms=("f16",))
    with pytest.raises(ValueError, match="unknown pipe class"):
        fam.declare("not_an_opcode", emit=lambda g, i: None, pipe="fp128")
    with pytest.raises(RuntimeError, match="provided twice"):
        registry.provide(_popc=len)
    with pytest.raises(RuntimeError, match="registered twice"):
        registry.special_register("%clock", lambda g, i, t: "")


@pytest.mark.parametrize("instruction", ["add.NaN.f16 %h1, %h1, %h2", "fma.rn.NaN.bf16 %h1, %h1, %h2, %h2",
                                         "ex2.approx.NaN.f16 %h1, %h2"])
def test_nan_is_refused_where_only_min_and_max_take_it(instruction):
    """.NaN is a modifier of min/max alone (ptxas refuses it elsewhere); the half-type
    emitters of add/fma/ex2 used to take it and fail at run time inside the helper."""
    from lowlevel.emu.engine.decode import load_ptx
    from lowlevel.emu.ptx.errors import PtxError
    text = (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n"
            f"  .reg .b16 %h<3>;\n  mov.b16 %h1, 0;\n  mov.b16 %h2, 0;\n  {instruction};\n  ret;\n}}\n")
    with pytest.raises(PtxError, match=r"\.NaN"):
        load_ptx(text)
