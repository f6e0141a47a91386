"""The kernels generated from commented templates (tools/gen_dtype_ptx.py, gen_reduce_ptx.py,
gen_cast_ptx.py, gen_mask_ptx.py, gen_index_ptx.py, gen_math_f64_ptx.py, gen_pow_f64_ptx.py, gen_half_ptx.py,
gen_floordiv_ptx.py): each committed ptx/ file must be what its generator writes,
so that the template and the kernels never drift apart (test_ptx_files.py assembles them with
ptxas and checks their comments like every file)."""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _generator(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


@pytest.mark.parametrize("name", ["gen_dtype_ptx", "gen_reduce_ptx", "gen_half_ptx"])
def test_generated_files_are_current(name):
    files = _generator(name).generate()
    assert files
    for file, text in files.items():
        assert (ROOT / "ptx" / file).read_text() == text, f"ptx/{file} is stale: run python tools/{name}.py"


@pytest.mark.parametrize("name,file", [("gen_cast_ptx", "cast_all.ptx"), ("gen_mask_ptx", "masked.ptx"),
                                       ("gen_index_ptx", "index_ops.ptx"),
                                       ("gen_math_f64_ptx", "math_f64.ptx"), ("gen_pow_f64_ptx", "pow_f64.ptx"),
                                       ("gen_floordiv_ptx", "floordiv.ptx")])
def test_generated_file_is_current(name, file):
    assert (ROOT / "ptx" / file).read_text() == _generator(name).generate(), \
        f"ptx/{file} is stale: run python tools/{name}.py"


def test_every_pair_of_dtypes_has_a_cast_kernel():
    text = "".join((ROOT / "ptx" / f).read_text() for f in ("cast_all.ptx", "tensor_ops.ptx", "cast_bf16.ptx"))
    names = ["bool", "i32", "i64", "f16", "bf16", "f32", "f64"]
    missing = [f"cast_{a}_{b}" for a in names for b in names if a != b and f".entry cast_{a}_{b}(" not in text]
    assert not missing, missing
