"""Type promotion, Python scalars, 0-d tensors, in-place refusals and creation, written as a
PyTorch user writes them: run by tests/frontend/test_torch_differential.py with `T` bound to
torch and to lowlevel (on "cpu" and on "cuda")."""
T = None        # bound by the harness


def snippet_inplace_add_of_a_float_to_an_int_tensor():
    i = T.tensor([1, 2])
    i += 1.5
    return i


def snippet_inplace_true_division_of_an_int_tensor():
    i = T.tensor([4, 6])
    i /= 2
    return i


def snippet_inplace_float16_plus_float64_tensor():
    h = T.tensor([1.25, -2.5], dtype=T.float16)
    h += T.tensor([0.001, 3.0], dtype=T.float64)
    return h


def snippet_inplace_int_times_int32_tensor():
    i = T.tensor([3, -4])
    i *= T.tensor([2, 5], dtype=T.int32)
    return i


def snippet_inplace_bool_plus_int():
    m = T.tensor([True, False])
    m += 1
    return m


def snippet_inplace_float_minus_int_tensor():
    f = T.tensor([1.5, 2.5])
    f -= T.tensor([1, 2])
    return f


def snippet_inplace_floor_divide_int_by_float():
    i = T.tensor([7, -7])
    i //= 2.0
    return i


def snippet_inplace_remainder_of_floats():
    f = T.tensor([7.5, -7.5])
    f %= 2
    return f


def snippet_inplace_add_of_a_float64_0d_to_float32():
    f = T.tensor([1.0, 2.0])
    f.add_(T.tensor(0.5, dtype=T.float64))
    return f


def snippet_inplace_mul_of_bool_by_bool():
    m = T.tensor([True, False])
    m *= T.tensor([True, True])
    return m


# --- int tensor times a Python float (issue 23)
T.tensor([1, 2]) * 1.5
# --- int tensor times a half
T.tensor([3, 2]) * 0.5
# --- int tensor plus a Python int
T.tensor([1, 2]) + 3
# --- int32 tensor plus a Python int stays int32
T.tensor([1, 2], dtype=T.int32) + 3
# --- int32 tensor plus a Python float
T.tensor([1, 2], dtype=T.int32) + 0.25
# --- bool tensor plus a Python int
T.tensor([True, False]) + 2
# --- bool tensor plus a Python bool
T.tensor([True, False]) + True
# --- bool tensor times a Python float
T.tensor([True, False]) * 2.5
# --- float16 tensor plus a Python float stays float16
T.tensor([1.5, 2.0], dtype=T.float16) + 2.5
# --- bfloat16 tensor times a Python int
T.tensor([1.5, -2.0], dtype=T.bfloat16) * 3
# --- float64 tensor plus a Python float
T.tensor([1.5, 2.0], dtype=T.float64) + 0.1
# --- reflected: a Python float minus an int tensor
2.5 - T.tensor([1, 2])
# --- reflected: a Python int minus an int32 tensor
10 - T.tensor([1, 2], dtype=T.int32)
# --- reflected: a Python float divided by an int tensor
1.0 / T.tensor([2, 4])
# --- reflected: a Python int times a bool tensor
3 * T.tensor([True, False])
# --- float32 plus float64 tensors
T.tensor([1.0, 2.0]) + T.tensor([0.5, 0.25], dtype=T.float64)
# --- float16 times bfloat16 tensors meet at float32
T.tensor([1.5, 2.0], dtype=T.float16) * T.tensor([2.0, -1.0], dtype=T.bfloat16)
# --- int32 plus int64 tensors
T.tensor([1, 2], dtype=T.int32) + T.tensor([3, 4])
# --- int64 plus float16 tensors
T.tensor([1, 2]) + T.tensor([0.5, 0.25], dtype=T.float16)
# --- bool plus int32 tensors
T.tensor([True, False]) + T.tensor([3, 4], dtype=T.int32)
# --- bool times float64 tensors
T.tensor([True, False]) * T.tensor([3.5, 4.5], dtype=T.float64)
# --- int32 minus bfloat16 tensors
T.tensor([1, 2], dtype=T.int32) - T.tensor([0.5, 0.25], dtype=T.bfloat16)
# --- int tensor plus a 0-d float64 tensor takes float64
T.tensor([1, 2]) + T.tensor(0.5, dtype=T.float64)
# --- int32 tensor plus a 0-d int64 tensor stays int32
T.tensor([1, 2], dtype=T.int32) + T.tensor(5)
# --- float16 tensor plus a 0-d float64 tensor stays float16
T.tensor([1.5, 2.0], dtype=T.float16) + T.tensor(0.25, dtype=T.float64)
# --- bool tensor plus a 0-d int32 tensor
T.tensor([True, False]) + T.tensor(3, dtype=T.int32)
# --- 0-d int tensor plus a Python float
T.tensor(3) + 0.5
# --- 0-d float64 tensor plus a 0-d float32 tensor
T.tensor(1.5, dtype=T.float64) + T.tensor(2.25)
# --- 0-d int32 tensor times a 0-d bool tensor
T.tensor(3, dtype=T.int32) * T.tensor(True)
# --- 0-d float16 tensor plus an int64 tensor
T.tensor(1.5, dtype=T.float16) + T.tensor([1, 2])
# --- 0-d bool tensor plus a Python int
T.tensor(True) + 1
# --- broadcasting with promotion
T.tensor([[1], [2]]) * T.tensor([0.5, 1.5, 2.5])
# --- true division of int tensors
T.tensor([3, 4]) / T.tensor([2, 8])
# --- true division of an int tensor by a Python int
T.tensor([3, -7]) / 2
# --- true division of bool tensors
T.tensor([True, False]) / T.tensor([True, True])
# --- true division of int32 by int32 gives the default float
(T.tensor([1, 2], dtype=T.int32) / T.tensor([4, 4], dtype=T.int32)).dtype
# --- true division of float16 by an int tensor stays float16
T.tensor([1.5, 3.0], dtype=T.float16) / T.tensor([2, 4])
# --- floor division of ints
T.tensor([7, -7, 7, -7]) // T.tensor([2, 2, -2, -2])
# --- floor division of an int tensor by a Python int
T.tensor([5, -5, 0]) // 3
# --- floor division of floats
T.tensor([7.5, -7.5, 0.5]) // T.tensor([2.0, 2.0, -0.25])
# --- floor division by a Python float promotes
T.tensor([7, -7]) // 2.5
# --- floor division, reflected
7 // T.tensor([2, -2, 3])
# --- floor division of float by zero
T.tensor([1.0, -1.0, 0.0]) // 0.0
# --- floor division that rounds across an integer
T.tensor([1.0], dtype=T.float64) // 0.1
# --- floor division of int32 by int64
T.tensor([9, -9], dtype=T.int32) // T.tensor([4, 4])
# --- floor division of float16 tensors
T.tensor([7.5, -7.5], dtype=T.float16) // T.tensor([2.0, 2.0], dtype=T.float16)
# --- floor division of bfloat16 by a Python int
T.tensor([7.5, -7.5], dtype=T.bfloat16) // 2
# --- floor division of bools is refused
T.tensor([True]) // T.tensor([True])
# --- [cpu] floor division of an int tensor by zero is refused on the CPU (undefined on a GPU)
T.tensor([5]) // T.tensor([0])
# --- remainder of ints takes the divisor's sign
T.tensor([7, -7, 7, -7]) % T.tensor([3, 3, -3, -3])
# --- remainder of an int tensor by a Python int
T.tensor([5, -5, 0]) % 3
# --- remainder of floats
T.tensor([7.5, -7.5, 5.0]) % T.tensor([2.0, 2.0, -3.0])
# --- remainder by a Python float promotes
T.tensor([7, -7]) % 2.5
# --- remainder, reflected
7 % T.tensor([2, -2, 3])
# --- remainder of floats by infinity
T.tensor([1.0, -1.0]) % float("inf")
# --- remainder of float by zero is NaN
T.tensor([1.0, -1.0]) % 0.0
# --- remainder of float64
T.tensor([10.0, -10.0], dtype=T.float64) % T.tensor([3.0, 3.0], dtype=T.float64)
# --- remainder of bools is refused
T.tensor([True]) % T.tensor([True])
# --- floor_divide and remainder as functions
(T.floor_divide(T.tensor([7, -7]), 2), T.remainder(T.tensor([7, -7]), 2))
# --- floor_divide and remainder as methods
(T.tensor([7.0, -7.0]).floor_divide(2), T.tensor([7.0, -7.0]).remainder(-2))
# --- subtraction of bools is refused
T.tensor([True]) - T.tensor([False])
# --- a bool tensor minus a Python int
T.tensor([True, False]) - 1
# --- comparison of an int tensor with a fraction
T.tensor([1, 2, 3]) > 1.5
# --- equality of an int tensor with a float
T.tensor([1, 2, 3]) == 2.0
# --- comparison of int32 with float64 tensors
T.tensor([1, 2], dtype=T.int32) < T.tensor([1.5, 1.5], dtype=T.float64)
# --- comparison of float16 with float32 tensors
T.tensor([0.1, 0.2], dtype=T.float16) == T.tensor([0.1, 0.2])
# --- comparison of bool with int tensors
T.tensor([True, False]) == T.tensor([1, 0])
# --- comparison with a 0-d tensor
T.tensor([1, 2, 3]) >= T.tensor(2.5)
# --- reflected comparison with a Python float
2.5 < T.tensor([1, 2, 3])
# --- comparison of bool tensor with a Python int
T.tensor([True, False]) != 1
# --- maximum of int and float tensors
T.maximum(T.tensor([1, 5]), T.tensor([2.5, 2.5]))
# --- minimum of float16 and float32 tensors
T.minimum(T.tensor([1.5, 5.0], dtype=T.float16), T.tensor([2.5, 2.5]))
# --- clamp of an int tensor by float bounds
T.tensor([1, 5, 9]).clamp(2.5, 7.5)
# --- clamp of a bool tensor by int bounds
T.tensor([True, False]).clamp(0, 1)
# --- where with an int tensor and a Python float
T.where(T.tensor([True, False]), T.tensor([1, 2]), 2.5)
# --- where with a float16 tensor and a float64 tensor
T.where(T.tensor([True, False]), T.tensor([1.5, 2.5], dtype=T.float16), T.tensor([0.5, 0.5], dtype=T.float64))
# --- where with an int32 tensor and a Python int
T.where(T.tensor([True, False]), T.tensor([1, 2], dtype=T.int32), 7)
# --- cat of int and float16 tensors
T.cat([T.tensor([1, 2]), T.tensor([1.5], dtype=T.float16)])
# --- cat of bool and int32 tensors
T.cat([T.tensor([True]), T.tensor([7], dtype=T.int32)])
# --- cat of float32 and float64 tensors
T.cat([T.tensor([[1.0]]), T.tensor([[2.0]], dtype=T.float64)], 1)
# --- stack of 0-d int32 and float64 tensors
T.stack([T.tensor(1, dtype=T.int32), T.tensor(2.5, dtype=T.float64)])
# --- exp of an int tensor computes in float32
T.exp(T.tensor([0, 1]))
# --- sqrt of an int tensor
T.tensor([4, 9]).sqrt()
# --- sigmoid of a bool tensor
T.tensor([True, False]).sigmoid()
# --- pow of an int tensor by a float
T.tensor([4, 9]) ** 0.5
# --- int tensor from a list
T.tensor([1, 2]).dtype
# --- float tensor from a list with a float
T.tensor([1, 2.5])
# --- bool tensor from a list
T.tensor([True, False]).dtype
# --- int32 overflow at creation is refused
T.tensor([2 ** 31], dtype=T.int32)
# --- int64 overflow at creation is refused
T.tensor([2 ** 63])
# --- the most negative int64 is taken
T.tensor([-2 ** 63, 2 ** 63 - 1])
# --- a big int into a float tensor
T.tensor([2 ** 63], dtype=T.float32)
# --- an int beyond uint64 beside a float makes a float tensor
T.tensor([1.5, 2 ** 70])
# --- an int beyond uint64 alone is refused
T.tensor([2 ** 70])
# --- bools and ints in one list make an int64 tensor
T.tensor([True, 2])
# --- a float too big for int32 is refused
T.tensor([3.0e10], dtype=T.int32)
# --- full infers int64 from an int
T.full((2,), 7)
# --- full infers bool from a bool
T.full((2,), True)
# --- full infers float32 from a float
T.full((2,), 1.5)
# --- full with a dtype
T.full((2, 2), 3, dtype=T.float64)
# --- full of int32 overflow is refused
T.full((2,), 2 ** 31, dtype=T.int32)
# --- zeros and ones stay float32
(T.zeros(2).dtype, T.ones(2, dtype=T.int32).dtype)
# --- arange of ints and of floats
(T.arange(3), T.arange(0.0, 1.0, 0.25))
# --- result_type of a tensor and a float
T.result_type(T.tensor([1, 2]), 1.5)
# --- result_type of an int32 tensor and a 0-d int64 tensor
T.result_type(T.tensor([1], dtype=T.int32), T.tensor(1))
# --- result_type of two numbers
T.result_type(2, 1.5)
# --- result_type of a float16 tensor and a Python float
T.result_type(T.tensor([1.0], dtype=T.float16), 2.5)
# --- promote_types of float16 and bfloat16
T.promote_types(T.float16, T.bfloat16)
# --- promote_types of int32 and bool
T.promote_types(T.int32, T.bool)
# --- can_cast float to int
(T.can_cast(T.float32, T.int64), T.can_cast(T.int64, T.float16), T.can_cast(T.int32, T.bool))
# --- sum of an int tensor times a float
(T.tensor([1, 2, 3]) * 0.5).sum()
# --- item of a promoted 0-d result
(T.tensor(3) * 0.5).item()
# --- a chain of mixed dtypes
((T.tensor([1, 2], dtype=T.int32) + 1) * T.tensor([0.5, 0.5], dtype=T.float16) - 2) / 3
# --- clamp_ of an int tensor by float bounds is refused
T.tensor([1, 5]).clamp_(2.5, 4.5)
# --- clamp_ of an int tensor by int bounds
T.tensor([1, 5]).clamp_(2, 4)
# --- clamp_ of a float16 tensor by a 0-d float64 tensor
T.tensor([1.0, 5.0], dtype=T.float16).clamp_(T.tensor(2.0, dtype=T.float64))
# --- fill_ of an int tensor with a float truncates
T.tensor([1, 2]).fill_(2.7)
# --- copy_ of floats into an int tensor truncates
T.tensor([1, 2]).copy_(T.tensor([2.7, -1.2]))
# --- a float beyond float16's range becomes inf
T.tensor([1.0], dtype=T.float16) * 1e10
# --- item assignment of a float into an int tensor
def _assign(t, v):
    t[0] = v
    return t


_assign(T.tensor([1, 2]), 7.9)
# --- where of two Python numbers
T.where(T.tensor([True, False]), 1.0, 0)
# --- where of two Python ints
T.where(T.tensor([True, False]), 1, 0)
