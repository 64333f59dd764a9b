"""
Replay schemes that only the comparison's ablations use: they answer why a scheme does as it does on the pairs env,
and are not part of the library.

- ``OnlineLossReLo``: ReLo without its target critics' loss, so that the reducible loss's subtraction is the only
  difference from ``ReLo``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch as th

from sb3_per import ReLo
from sb3_per.schemes.base import Critics, CriticStep, online_critic_loss


@dataclass(frozen=True)
class OnlineLossReLo(ReLo):
    """
    ``ReLo`` with ``L_on`` for its priority instead of ``relu(L_on - L_tgt)``: the online critics' per-sample loss
    averaged over the critics (``PER(priority="loss")``'s priority, the PER baseline of ReLo's authors). Everything
    else is ReLo's: the same batch for the critic and the actor, both losses weighted by the batch's IS weights, and
    whatever buffer settings the run gives ReLo. Beside ``ReLo`` at the same seeds it measures what subtracting the
    target critics' loss does.
    """

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        return online_critic_loss(step, critics)
