"""Issue 23's "rest of the surface" (methods, method forms, math, logical and bitwise ops,
reflected operators, chunk/split, matrix products, relu_, retain_grad, to(...), format,
repr, creation), written as a PyTorch user writes it: run by the torch differential harness
(tests/frontend/test_torch_differential.py, and test_surface_snippets.py) with `T` bound to
torch and to lowlevel, whose creation functions then make tensors on "cpu" or on "cuda"
(.cpu() where a snippet needs the CPU). Each returns a tensor, a tuple of them, or a
Python value, compared by value, dtype and shape."""
T = None        # bound by the harness


def _x():
    return T.tensor([[1.5, -2.25, 0.0, 3.0], [0.5, 4.0, -1.0, 2.5]])


def _i():
    return T.tensor([[3, -1, 0, 7], [2, 5, -8, 1]])


# dtype and metadata methods:
def snippet_long(): return _x().long()
def snippet_int(): return _x().int()
def snippet_bool(): return _x().bool()
def snippet_float_of_int(): return _i().float()
def snippet_double(): return _x().double()
def snippet_t(): return _x().t()
def snippet_t_1d(): return T.tensor([1.0, 2.0]).t()
def snippet_dim(): return _x().dim()
def snippet_ndim(): return _x().ndim
def snippet_stride(): return _x().stride()
def snippet_stride_dim(): return _x().t().stride(0)
def snippet_numel(): return _x().numel()
def snippet_element_size(): return _x().double().element_size()
def snippet_is_floating_point(): return (_x().is_floating_point(), _i().is_floating_point())
def snippet_type_as(): return _i().type_as(_x())
def snippet_new_zeros(): return _x().new_zeros(2, 3)
def snippet_new_ones(): return _i().new_ones((3,))


# method forms:
def snippet_add_method(): return _x().add(_x())
def snippet_add_alpha(): return _x().add(_x(), alpha=2)
def snippet_add_scalar_alpha(): return T.add(_x(), 1.5, alpha=2)
def snippet_sub_alpha(): return _x().sub(_x() * 3, alpha=0.5)
def snippet_mul_method(): return _x().mul(2.0)
def snippet_div_method(): return _x().div(4.0)
def snippet_div_trunc(): return _x().div(0.7, rounding_mode="trunc")
def snippet_div_floor(): return _x().div(0.7, rounding_mode="floor")
def snippet_div_floor_int(): return _i().div(T.tensor([2, 2, 3, 3]), rounding_mode="floor")
def snippet_neg_method(): return _x().neg()
def snippet_matmul_method(): return _x().matmul(_x().t())


# math:
def snippet_sin(): return _x().sin()
def snippet_cos(): return T.cos(_x())
def snippet_sin_large(): return T.sin(T.tensor([100.0, -1000.0, 31.4159]))
def snippet_floor(): return _x().floor()
def snippet_ceil(): return T.ceil(_x())
def snippet_round_half_even(): return T.tensor([0.5, 1.5, 2.5, -0.5, -1.5]).round()
def snippet_trunc(): return _x().trunc()
def snippet_floor_int(): return _i().floor()
def snippet_sign(): return _x().sign()
def snippet_sign_int(): return T.sign(_i())
def snippet_reciprocal(): return T.tensor([2.0, -4.0, 0.5]).reciprocal()
def snippet_reciprocal_int(): return T.tensor([2, 4]).reciprocal()
def snippet_square(): return _x().square()
def snippet_square_int(): return _i().square()
def snippet_exp2(): return _x().exp2()
def snippet_log2(): return T.tensor([1.0, 8.0, 0.5, 10.0]).log2()
def snippet_log10(): return T.log10(T.tensor([1.0, 100.0, 0.001, 7.0]))
def snippet_log_softmax(): return _x().log_softmax(1)
def snippet_log_softmax_dim0(): return T.log_softmax(_x(), 0)
def snippet_log_softmax_large(): return T.tensor([[1000.0, 0.0, -1000.0]]).log_softmax(-1)
def snippet_sin_double(): return _x().double().sin()
def snippet_floor_half(): return _x().half().floor()


# NaN and infinity tests, logical ops:
def _special():
    return T.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])


def snippet_isnan(): return _special().isnan()
def snippet_isinf(): return T.isinf(_special())
def snippet_isfinite(): return _special().isfinite()
def snippet_isnan_int(): return _i().isnan()
def snippet_nan_count(): return _special().isnan().sum()
def snippet_logical_and(): return T.logical_and(_x() > 0, _x() < 2)
def snippet_logical_or(): return T.logical_or(_i(), T.zeros(2, 4))
def snippet_logical_xor(): return _x().logical_xor(_i())
def snippet_logical_not(): return T.logical_not(_i())


# whole-tensor comparisons:
def snippet_equal(): return T.equal(_x(), _x().clone())
def snippet_equal_shape(): return T.equal(_x(), _x()[:1])
def snippet_allclose(): return T.allclose(_x(), _x() + 1e-7)
def snippet_allclose_far(): return _x().allclose(_x() + 1e-3)
def snippet_isclose(): return T.isclose(_x(), _x() * 1.000001)
def snippet_allclose_nan(): return T.allclose(_special(), _special(), equal_nan=True)


# operators:
def snippet_and_bool(): return (_x() > 0) & (_x() < 3)
def snippet_or_bool(): return (_x() > 2) | (_x() < -1)
def snippet_xor_bool(): return (_x() > 0) ^ (_i() > 0)
def snippet_invert_bool(): return ~(_x() > 0)
def snippet_and_int(): return _i() & 6
def snippet_or_int(): return _i() | T.tensor([1, 2, 4, 8])
def snippet_xor_int(): return _i() ^ T.tensor([[1, 1, 2, 2]])
def snippet_invert_int(): return ~_i()
def snippet_rand_int(): return 6 & _i()
def snippet_and_mask_int(): return (_x() > 0) & 5
def snippet_and_int32_int64(): return _i().int() & T.tensor([[6, 6, 3, 3]])
def snippet_or_mask_int32(): return (_x() > 0) | _i().int()
def snippet_iand():
    m = _x() > 0
    view = m
    m &= _x() < 3
    return view


def snippet_ior_refused():
    m = _x() > 0
    m |= _i()
    return m


def snippet_rpow(): return 2 ** _x()
def snippet_rpow_int(): return 2 ** T.tensor([0, 1, 5, 10])
def snippet_rsub(): return 2 - _x()
def snippet_rtruediv(): return 1 / T.tensor([2.0, -4.0, 8.0])
def snippet_rmul(): return 3 * _x()
def snippet_mask_select(): return _x()[(_x() > 0) & (_x() < 4)]


# chunk, split:
def snippet_chunk(): return _x().chunk(2, 1)
def snippet_chunk_uneven(): return T.chunk(T.arange(10), 3)
def snippet_chunk_more_than_size(): return T.arange(3).chunk(5)
def snippet_split_size(): return T.arange(10).split(4)
def snippet_split_sizes(): return _x().split([1, 3], dim=1)
def snippet_split_fn(): return T.split(_x(), 1)
def snippet_narrow(): return _x().narrow(1, 1, 2)


# matrix products:
def snippet_mm(): return T.mm(_x(), _x().t())
def snippet_bmm(): return T.bmm(T.ones(2, 3, 4), T.ones(2, 4, 5))
def snippet_matmul_4d(): return T.matmul(T.ones(2, 3, 4, 5), T.ones(5, 2))
def snippet_matmul_broadcast_batch(): return T.ones(2, 1, 3, 4) @ T.ones(5, 4, 2)
def snippet_matmul_vec_4d(): return T.ones(4) @ T.ones(2, 3, 4, 5)
def snippet_matmul_3d_bcast(): return T.ones(1, 3, 4) @ T.ones(6, 4, 2)


# in place, autograd:
def snippet_relu_():
    x = _x()
    x.relu_()
    return x


def snippet_retain_grad():
    w = T.tensor([1.0, -2.0, 3.0], requires_grad=True)
    h = w * 2
    h.retain_grad()
    (h * h).sum().backward()
    return h.grad, w.grad


def snippet_sin_grad():
    w = T.tensor([0.5, -1.0], requires_grad=True)
    w.sin().sum().backward()
    return w.grad


def snippet_log_softmax_grad():
    w = T.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    (w.log_softmax(1) * T.tensor([[1.0, 2.0, 3.0]])).sum().backward()
    return w.grad


def snippet_matmul_4d_grad():
    a = T.ones(2, 1, 2, 3, requires_grad=True)
    b = T.ones(3, 3, 2, requires_grad=True)
    (a @ b).sum().backward()
    return a.grad, b.grad


# conversions, scalars, formatting:
def snippet_to_dtype_kw(): return _x().to(dtype=T.float64)
def snippet_to_device_dtype(): return _x().to("cpu", T.float16)
def snippet_to_other(): return _x().to(_i())
def snippet_to_copy():
    x = _x()
    return x.to(T.float32, copy=True) is x
def snippet_cpu_scalar_operand(): return _x() * T.tensor(2.0).cpu()
def snippet_cpu_scalar_left(): return T.tensor(10.0).cpu() - _x()
def snippet_format_0d(): return f"{_x().sum():.2f}"
def snippet_format_int_0d(): return f"{T.tensor(7):>4}"
def snippet_repr_float(): return repr(T.tensor([1.5, 2.0]).cpu()).replace("lowlevel.", "torch.")
def snippet_repr_int(): return repr(T.tensor([1, 2]).cpu())
def snippet_repr_int32(): return repr(T.tensor([1, 2], dtype=T.int32).cpu()).replace("lowlevel.", "torch.")
def snippet_repr_sci(): return repr(T.tensor([1e-5, 1e3]).cpu())
def snippet_repr_2d(): return repr(T.tensor([[1.5, -2.25, 0.0, 3.0], [0.5, 4.0, -1.0, 2.5]]).cpu())
def snippet_repr_grad(): return repr(T.tensor([1.0, 2.0]).cpu().requires_grad_() * 2)
def snippet_repr_bool(): return repr(T.tensor([True, False]).cpu())
def snippet_repr_big(): return repr(T.arange(2000.0).cpu())
def snippet_full_like(): return T.full_like(_x(), 7)
def snippet_full_like_dtype(): return T.full_like(_i(), 2.5, dtype=T.float32)
def snippet_randint_shape(): return T.randint(0, 10, (3, 4)).shape
def snippet_randint_dtype(): return T.randint(5, (2,)).dtype == T.int64
def snippet_randint_range(): return bool(((T.randint(-3, 3, (1000,)) >= -3).all()))
def snippet_rand_range(): return bool(((T.rand(1000) < 1).all()))
def snippet_arange_float(): return T.arange(0, 1, 0.25)
def snippet_eye(): return T.eye(3, 4)


def snippet_bitwise_and_with_a_0d_int64_keeps_int32():
    # a 0-d tensor raises the category, never the width (torch.result_type): int32
    return T.tensor([5, 6], dtype=T.int32) & T.tensor(3)


def snippet_bitwise_or_bool_mask_with_0d_int32():
    return T.tensor([True, False]) | T.tensor(2, dtype=T.int32)
