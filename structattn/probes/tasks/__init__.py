"""Built-in tasks; importing this package registers them."""

from structattn.probes.tasks import depth_tagging, head_selection  # noqa: F401  (registration)
