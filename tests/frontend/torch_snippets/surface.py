"""PyTorch-style snippets of issue 23's "rest of the surface", for the torch differential
harness: each `snippet_<name>(T, device)` is written as a PyTorch user writes it, with `T`
the torch-like module (torch, or lowlevel) and `device` "cpu" or "cuda" (torch runs them
on "cpu"). A snippet returns a tensor, a tuple or list of them, or a Python value; the
harness compares value, dtype and shape. Not a test module itself (test_surface_snippets.py
runs them against torch until the harness does)."""


def _x(T, device):
    return T.tensor([[1.5, -2.25, 0.0, 3.0], [0.5, 4.0, -1.0, 2.5]], device=device)


def _i(T, device):
    return T.tensor([[3, -1, 0, 7], [2, 5, -8, 1]], device=device)


# ---- dtype and metadata methods ------------------------------------------------------------------
def snippet_long(T, device): return _x(T, device).long()
def snippet_int(T, device): return _x(T, device).int()
def snippet_bool(T, device): return _x(T, device).bool()
def snippet_float_of_int(T, device): return _i(T, device).float()
def snippet_double(T, device): return _x(T, device).double()
def snippet_t(T, device): return _x(T, device).t()
def snippet_t_1d(T, device): return T.tensor([1.0, 2.0], device=device).t()
def snippet_dim(T, device): return _x(T, device).dim()
def snippet_ndim(T, device): return _x(T, device).ndim
def snippet_stride(T, device): return _x(T, device).stride()
def snippet_stride_dim(T, device): return _x(T, device).t().stride(0)
def snippet_numel(T, device): return _x(T, device).numel()
def snippet_element_size(T, device): return _x(T, device).double().element_size()
def snippet_is_floating_point(T, device): return (_x(T, device).is_floating_point(), _i(T, device).is_floating_point())
def snippet_type_as(T, device): return _i(T, device).type_as(_x(T, device))
def snippet_new_zeros(T, device): return _x(T, device).new_zeros(2, 3)
def snippet_new_ones(T, device): return _i(T, device).new_ones((3,))


# ---- method forms -------------------------------------------------------------------------------
def snippet_add_method(T, device): return _x(T, device).add(_x(T, device))
def snippet_add_alpha(T, device): return _x(T, device).add(_x(T, device), alpha=2)
def snippet_add_scalar_alpha(T, device): return T.add(_x(T, device), 1.5, alpha=2)
def snippet_sub_alpha(T, device): return _x(T, device).sub(_x(T, device) * 3, alpha=0.5)
def snippet_mul_method(T, device): return _x(T, device).mul(2.0)
def snippet_div_method(T, device): return _x(T, device).div(4.0)
def snippet_div_trunc(T, device): return _x(T, device).div(0.7, rounding_mode="trunc")
def snippet_div_floor(T, device): return _x(T, device).div(0.7, rounding_mode="floor")
def snippet_div_floor_int(T, device): return _i(T, device).div(T.tensor([2, 2, 3, 3], device=device), rounding_mode="floor")
def snippet_neg_method(T, device): return _x(T, device).neg()
def snippet_matmul_method(T, device): return _x(T, device).matmul(_x(T, device).t())


# ---- math ---------------------------------------------------------------------------------------
def snippet_sin(T, device): return _x(T, device).sin()
def snippet_cos(T, device): return T.cos(_x(T, device))
def snippet_sin_large(T, device): return T.sin(T.tensor([100.0, -1000.0, 31.4159], device=device))
def snippet_floor(T, device): return _x(T, device).floor()
def snippet_ceil(T, device): return T.ceil(_x(T, device))
def snippet_round_half_even(T, device): return T.tensor([0.5, 1.5, 2.5, -0.5, -1.5], device=device).round()
def snippet_trunc(T, device): return _x(T, device).trunc()
def snippet_floor_int(T, device): return _i(T, device).floor()
def snippet_sign(T, device): return _x(T, device).sign()
def snippet_sign_int(T, device): return T.sign(_i(T, device))
def snippet_reciprocal(T, device): return T.tensor([2.0, -4.0, 0.5], device=device).reciprocal()
def snippet_reciprocal_int(T, device): return T.tensor([2, 4], device=device).reciprocal()
def snippet_square(T, device): return _x(T, device).square()
def snippet_square_int(T, device): return _i(T, device).square()
def snippet_exp2(T, device): return _x(T, device).exp2()
def snippet_log2(T, device): return T.tensor([1.0, 8.0, 0.5, 10.0], device=device).log2()
def snippet_log10(T, device): return T.log10(T.tensor([1.0, 100.0, 0.001, 7.0], device=device))
def snippet_log_softmax(T, device): return _x(T, device).log_softmax(1)
def snippet_log_softmax_dim0(T, device): return T.log_softmax(_x(T, device), 0)
def snippet_log_softmax_large(T, device): return T.tensor([[1000.0, 0.0, -1000.0]], device=device).log_softmax(-1)
def snippet_sin_double(T, device): return _x(T, device).double().sin()
def snippet_floor_half(T, device): return _x(T, device).half().floor()


# ---- NaN and infinity tests, logical ops ------------------------------------------------------------
def _special(T, device):
    return T.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0], device=device)


def snippet_isnan(T, device): return _special(T, device).isnan()
def snippet_isinf(T, device): return T.isinf(_special(T, device))
def snippet_isfinite(T, device): return _special(T, device).isfinite()
def snippet_isnan_int(T, device): return _i(T, device).isnan()
def snippet_nan_count(T, device): return _special(T, device).isnan().sum()
def snippet_logical_and(T, device): return T.logical_and(_x(T, device) > 0, _x(T, device) < 2)
def snippet_logical_or(T, device): return T.logical_or(_i(T, device), T.zeros(2, 4, device=device))
def snippet_logical_xor(T, device): return _x(T, device).logical_xor(_i(T, device))
def snippet_logical_not(T, device): return T.logical_not(_i(T, device))


# ---- whole-tensor comparisons --------------------------------------------------------------------------
def snippet_equal(T, device): return T.equal(_x(T, device), _x(T, device).clone())
def snippet_equal_shape(T, device): return T.equal(_x(T, device), _x(T, device)[:1])
def snippet_allclose(T, device): return T.allclose(_x(T, device), _x(T, device) + 1e-7)
def snippet_allclose_far(T, device): return _x(T, device).allclose(_x(T, device) + 1e-3)
def snippet_isclose(T, device): return T.isclose(_x(T, device), _x(T, device) * 1.000001)
def snippet_allclose_nan(T, device): return T.allclose(_special(T, device), _special(T, device), equal_nan=True)


# ---- operators --------------------------------------------------------------------------------------------
def snippet_and_bool(T, device): return (_x(T, device) > 0) & (_x(T, device) < 3)
def snippet_or_bool(T, device): return (_x(T, device) > 2) | (_x(T, device) < -1)
def snippet_xor_bool(T, device): return (_x(T, device) > 0) ^ (_i(T, device) > 0)
def snippet_invert_bool(T, device): return ~(_x(T, device) > 0)
def snippet_and_int(T, device): return _i(T, device) & 6
def snippet_or_int(T, device): return _i(T, device) | T.tensor([1, 2, 4, 8], device=device)
def snippet_xor_int(T, device): return _i(T, device) ^ T.tensor([[1, 1, 2, 2]], device=device)
def snippet_invert_int(T, device): return ~_i(T, device)
def snippet_rand_int(T, device): return 6 & _i(T, device)
def snippet_rpow(T, device): return 2 ** _x(T, device)
def snippet_rpow_int(T, device): return 2 ** T.tensor([0, 1, 5, 10], device=device)
def snippet_rsub(T, device): return 2 - _x(T, device)
def snippet_rtruediv(T, device): return 1 / T.tensor([2.0, -4.0, 8.0], device=device)
def snippet_rmul(T, device): return 3 * _x(T, device)
def snippet_mask_select(T, device): return _x(T, device)[(_x(T, device) > 0) & (_x(T, device) < 4)]


# ---- chunk, split ----------------------------------------------------------------------------------------
def snippet_chunk(T, device): return _x(T, device).chunk(2, 1)
def snippet_chunk_uneven(T, device): return T.chunk(T.arange(10, device=device), 3)
def snippet_chunk_more_than_size(T, device): return T.arange(3, device=device).chunk(5)
def snippet_split_size(T, device): return T.arange(10, device=device).split(4)
def snippet_split_sizes(T, device): return _x(T, device).split([1, 3], dim=1)
def snippet_split_fn(T, device): return T.split(_x(T, device), 1)
def snippet_narrow(T, device): return _x(T, device).narrow(1, 1, 2)


# ---- matrix products -------------------------------------------------------------------------------------
def snippet_mm(T, device): return T.mm(_x(T, device), _x(T, device).t())
def snippet_bmm(T, device): return T.bmm(T.ones(2, 3, 4, device=device), T.ones(2, 4, 5, device=device))
def snippet_matmul_4d(T, device): return T.matmul(T.ones(2, 3, 4, 5, device=device), T.ones(5, 2, device=device))
def snippet_matmul_broadcast_batch(T, device): return T.ones(2, 1, 3, 4, device=device) @ T.ones(5, 4, 2, device=device)
def snippet_matmul_vec_4d(T, device): return T.ones(4, device=device) @ T.ones(2, 3, 4, 5, device=device)
def snippet_matmul_3d_bcast(T, device): return T.ones(1, 3, 4, device=device) @ T.ones(6, 4, 2, device=device)


# ---- in place, autograd ------------------------------------------------------------------------------------
def snippet_relu_(T, device):
    x = _x(T, device)
    x.relu_()
    return x


def snippet_retain_grad(T, device):
    w = T.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True)
    h = w * 2
    h.retain_grad()
    (h * h).sum().backward()
    return h.grad, w.grad


def snippet_sin_grad(T, device):
    w = T.tensor([0.5, -1.0], device=device, requires_grad=True)
    w.sin().sum().backward()
    return w.grad


def snippet_log_softmax_grad(T, device):
    w = T.tensor([[0.5, -1.0, 2.0]], device=device, requires_grad=True)
    (w.log_softmax(1) * T.tensor([[1.0, 2.0, 3.0]], device=device)).sum().backward()
    return w.grad


def snippet_matmul_4d_grad(T, device):
    a = T.ones(2, 1, 2, 3, device=device, requires_grad=True)
    b = T.ones(3, 3, 2, device=device, requires_grad=True)
    (a @ b).sum().backward()
    return a.grad, b.grad


# ---- conversions, scalars, formatting ------------------------------------------------------------------------
def snippet_to_dtype_kw(T, device): return _x(T, device).to(dtype=T.float64)
def snippet_to_device_dtype(T, device): return _x(T, device).to("cpu", T.float16)
def snippet_to_other(T, device): return _x(T, device).to(_i(T, device))
def snippet_to_copy(T, device):
    x = _x(T, device)
    return x.to(T.float32, copy=True) is x
def snippet_cpu_scalar_operand(T, device): return _x(T, device) * T.tensor(2.0)
def snippet_cpu_scalar_left(T, device): return T.tensor(10.0) - _x(T, device)
def snippet_format_0d(T, device): return f"{_x(T, device).sum():.2f}"
def snippet_format_int_0d(T, device): return f"{T.tensor(7, device=device):>4}"
def snippet_repr_float(T, device): return repr(T.tensor([1.5, 2.0])).replace("lowlevel.", "torch.")
def snippet_repr_int(T, device): return repr(T.tensor([1, 2]))
def snippet_repr_int32(T, device): return repr(T.tensor([1, 2], dtype=T.int32)).replace("lowlevel.", "torch.")
def snippet_repr_sci(T, device): return repr(T.tensor([1e-5, 1e3]))
def snippet_repr_2d(T, device): return repr(_x(T, "cpu"))
def snippet_repr_grad(T, device): return repr(T.tensor([1.0, 2.0], requires_grad=True) * 2)
def snippet_repr_bool(T, device): return repr(T.tensor([True, False]))
def snippet_repr_big(T, device): return repr(T.arange(2000.0))
def snippet_full_like(T, device): return T.full_like(_x(T, device), 7)
def snippet_full_like_dtype(T, device): return T.full_like(_i(T, device), 2.5, dtype=T.float32)
def snippet_randint_shape(T, device): return T.randint(0, 10, (3, 4), device=device).shape
def snippet_randint_dtype(T, device): return T.randint(5, (2,), device=device).dtype == T.int64
def snippet_randint_range(T, device): return bool(((T.randint(-3, 3, (1000,), device=device) >= -3).all()))
def snippet_rand_range(T, device): return bool(((T.rand(1000, device=device) < 1).all()))
def snippet_arange_float(T, device): return T.arange(0, 1, 0.25, device=device)
def snippet_eye(T, device): return T.eye(3, 4, device=device)
