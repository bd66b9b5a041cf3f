"""Tasks: where a task's data comes from, what it predicts, its labels and its majority baseline.

Layer order: structures -> attention -> encoders -> tasks -> training -> probes -> experiments. Tasks read
sentences and structures only; the built-in ones are registered when :func:`get_task` or :func:`task_names`
is first called (``structattn.tasks.builtin``).
"""

from structattn.tasks.base import IGNORE, OUTPUTS, TASKS, Item, Label, Task, get_task, register_task, task_names

__all__ = ["IGNORE", "OUTPUTS", "TASKS", "Item", "Label", "Task", "get_task", "register_task", "task_names"]
