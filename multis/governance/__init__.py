"""What /exec and /read may do, and the audit log. `Governance` (in `rules`) gets its command checks from `cmdline` and
its runner from `exec`; importing any of these modules loads all three, so the class is always complete."""
from . import rules, cmdline, exec  # noqa: F401
