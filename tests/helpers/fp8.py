"""The 8-bit floats of the PTX ISA ("Alternate floating point data formats"), for test
references, written from the format definitions: e4m3 = sign, 4 exponent bits (bias 7), 3
mantissa bits, no infinity, NaN S.1111.111; e5m2 = sign, 5 exponent bits (bias 15), 2
mantissa bits, IEEE-like (infinity S.11111.00, NaN S.11111.{01,10,11})."""
import math

import numpy as np

FORMATS = {"e4m3": (4, 3, 7), "e5m2": (5, 2, 15)}


def code_values(kind):
    """The value of each code 0..255 (float64; NaN for the NaN codes), by ldexp."""
    ebits, mbits, bias = FORMATS[kind]
    out = []
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        e, m = (code >> mbits) & ((1 << ebits) - 1), code & ((1 << mbits) - 1)
        if kind == "e4m3" and e == 15 and m == 7:
            out.append(math.nan)
        elif kind == "e5m2" and e == 31:
            out.append(sign * math.inf if m == 0 else math.nan)
        elif e == 0:
            out.append(sign * math.ldexp(m, 1 - bias - mbits))
        else:
            out.append(sign * math.ldexp((1 << mbits) + m, e - bias - mbits))
    return np.array(out)


def random_codes(rng, kind, shape, largest=8.0):
    """(values, codes) of random finite 8-bit floats of magnitude at most `largest` (so that
    sums of their products stay within f16's range), zeros and subnormals included."""
    vals = code_values(kind)
    pick = np.flatnonzero(np.isfinite(vals) & (np.abs(vals) <= largest))
    codes = rng.choice(pick, shape)
    return vals[codes], codes.astype(np.uint64)


def encode_reference(x, kind, relu):
    """Nearest finite code (ties to the even code), .satfinite, NaN -> 0x7F."""
    vals = code_values(kind)[:128]
    finite = np.flatnonzero(np.isfinite(vals))              # codes 0.. in increasing value
    pos = vals[finite]
    x = np.asarray(x, np.float64)
    out = np.empty(x.shape, np.int64)
    for i, v in enumerate(x.flat):
        if math.isnan(v):
            out.flat[i] = 0x7F
            continue
        if relu and v < 0:
            v = 0.0
        a = abs(v)
        j = int(np.searchsorted(pos, a))
        if j >= len(pos):
            code = finite[-1]                                # beyond the largest: saturate
        elif pos[j] == a or j == 0:
            code = finite[j]
        else:
            lo, hi = pos[j - 1], pos[j]
            if a - lo < hi - a:
                code = finite[j - 1]
            elif hi - a < a - lo:
                code = finite[j]
            else:
                code = finite[j - 1] if finite[j - 1] % 2 == 0 else finite[j]
        out.flat[i] = code | (0x80 if math.copysign(1.0, v) < 0 else 0)
    return out
