from .dispatcher import *  # noqa: F401,F403
from .dispatcher import _add_key, _dtype_of  # noqa: F401
from . import profiler  # noqa: F401
