from .layout import *  # noqa: F401,F403
