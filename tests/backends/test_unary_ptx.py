"""ptx/unary_f32.ptx is generated (tools/gen_unary_ptx.py): the committed file must be what
the generator writes, so that the commented template and the kernels never drift apart."""
import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_unary_f32_ptx_is_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location("gen_unary_ptx", ROOT / "tools" / "gen_unary_ptx.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    committed = (ROOT / "ptx" / "unary_f32.ptx").read_text()
    assert committed == gen.generate(), "ptx/unary_f32.ptx is stale: run python tools/gen_unary_ptx.py"
    for op in ("rsqrt", "log", "log1p", "expm1", "tanh", "sigmoid"):
        assert f".visible .entry {op}_f32(" in committed
