"""placeholder"""
from .context import error_details, functions, last_launch_stats, pending_interrupt, thread_instructions
