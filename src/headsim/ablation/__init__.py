"""Which heads matter: head ablation scored on human-labelled tasks (see docs/ablation.md)."""

from __future__ import annotations

from .intervention import ablate, gates, head_means, is_ablated
from .tasks import TASKS, Task, get_tasks

__all__ = ["TASKS", "Task", "ablate", "gates", "get_tasks", "head_means", "is_ablated"]
