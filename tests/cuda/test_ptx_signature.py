"""The parameter names and types read from PTX `.entry` signatures (cuda/ptx_signature.py),
in the forms compilers write: LLVM's NVPTX backend (Triton, clang) writes pointer
parameters as `.param .u64 .ptr .global .align 1 name`."""
from lowlevel.cuda.ptx_signature import kernel_params

PTX = """
.visible .entry add(
	.param .u64 .ptr .global .align 1 add_param_0,
	.param .u64 .ptr .align 16 add_param_1,
	.param .align 8 .b8 add_param_2[16],
	.param .u32 add_param_3,
	.param .f32 add_param_4
)
{ ret; }
"""


def test_pointer_parameters_keep_their_names():
    assert kernel_params(PTX)["add"] == [("add_param_0", "u64"), ("add_param_1", "u64"),
                                         ("add_param_2", "b8[]"), ("add_param_3", "u32"),
                                         ("add_param_4", "f32")]
