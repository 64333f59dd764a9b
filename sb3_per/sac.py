"""SAC with prioritized experience replay: an IS-weighted twin-critic loss and priority write-back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import stable_baselines3
import torch as th
from stable_baselines3.common.utils import polyak_update

from sb3_per.per_algorithm import PrioritizedReplayMixin, constructor_with_replay_scheme
from sb3_per.schemes import BatchSource, CriticStep, ReplayScheme
from sb3_per.schemes.base import CriticLoss
from sb3_per.schemes.losses import weighted_mean


class PolicySample(NamedTuple):
    """
    What SAC's entropy step gives the critic and actor steps that follow it.

    :param actions_pi: actions of the current actor for the actor batch's observations
    :param log_prob: their log-probabilities, shape (batch_size, 1)
    :param ent_coef: the entropy coefficient before the step (detached)
    :param ent_coef_loss: the entropy coefficient's loss, ``None`` when it is not learnt
    """

    actions_pi: th.Tensor
    log_prob: th.Tensor
    ent_coef: th.Tensor
    ent_coef_loss: th.Tensor | None


class SACTrainingSteps(PrioritizedReplayMixin):
    """
    SB3's ``SAC.train`` split into an entropy step, a critic step and an actor step that take their batch as an
    argument, for ``sb3_per.SAC`` and ``sb3_per.TQC`` (sb3-contrib's TQC trains as SAC does, with quantile critics:
    it replaces the critic and actor steps).
    """

    # Set by SB3's SAC or sb3-contrib's TQC (the host class)
    actor: Any
    critic: Any
    critic_target: Any
    policy: Any
    log_ent_coef: th.Tensor | None
    ent_coef_optimizer: th.optim.Adam | None
    ent_coef_tensor: th.Tensor
    target_entropy: float | str
    target_update_interval: int
    tau: float
    use_sde: bool
    batch_norm_stats: list[th.Tensor]
    batch_norm_stats_target: list[th.Tensor]
    _n_updates: int
    _update_learning_rate: Callable[[list[th.optim.Optimizer] | th.optim.Optimizer], None]

    def _train_with_scheme(
        self, scheme: ReplayScheme, batches: BatchSource, gradient_steps: int, batch_size: int
    ) -> None:
        """
        SB3's ``SAC.train`` (as of stable-baselines3 2.9; sb3-contrib's ``TQC.train`` is the same loop), its gradient
        step split into ``_entropy_step``, ``_critic_step`` and ``_actor_step``, run on each update the scheme gives
        (one batch for all three unless it says otherwise; the target networks follow each update), with the
        priority write-back after each critic step (``PER:``).
        """
        # Switch to train mode (this affects batch norm / dropout)
        self.policy.set_training_mode(True)
        # Update optimizers learning rate
        optimizers = [self.actor.optimizer, self.critic.optimizer]
        if self.ent_coef_optimizer is not None:
            optimizers += [self.ent_coef_optimizer]

        # Update learning rate according to lr schedule
        self._update_learning_rate(optimizers)

        ent_coef_losses, ent_coefs = [], []
        actor_losses, critic_losses = [], []

        for gradient_step in range(gradient_steps):
            for update in self._updates(scheme, batches, batch_size, True, self.weighted_critic_loss):
                # We need to sample because `log_std` may have changed between two gradient steps
                if self.use_sde:
                    self.actor.reset_noise()

                policy_sample = self._entropy_step(update.actor_batch)
                if policy_sample.ent_coef_loss is not None:
                    ent_coef_losses.append(policy_sample.ent_coef_loss.item())
                ent_coefs.append(policy_sample.ent_coef.item())

                critic_loss, step = self._critic_step(update.critic_batch, update.critic_loss, policy_sample)
                critic_losses.append(critic_loss.item())
                self._write_back(scheme, batches, step)  # PER

                actor_loss = self._actor_step(update.actor_batch, policy_sample, update.actor_weights)
                actor_losses.append(actor_loss.item())

                # Update target networks
                if gradient_step % self.target_update_interval == 0:
                    polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
                    # Copy running stats, see GH issue #996
                    polyak_update(self.batch_norm_stats, self.batch_norm_stats_target, 1.0)

        self._n_updates += gradient_steps

        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/ent_coef", np.mean(ent_coefs))
        self.logger.record("train/actor_loss", np.mean(actor_losses))
        self.logger.record("train/critic_loss", np.mean(critic_losses))
        if len(ent_coef_losses) > 0:
            self.logger.record("train/ent_coef_loss", np.mean(ent_coef_losses))

    def _entropy_step(self, replay_data: Any) -> PolicySample:
        """
        SB3's actor sampling and entropy-coefficient step, on the actor's batch.

        :param replay_data: the actor's batch
        :return: the actions and log-probabilities for the actor step, and the entropy coefficient
        """
        # Action by the current actor for the sampled state
        actions_pi, log_prob = self.actor.action_log_prob(replay_data.observations)
        log_prob = log_prob.reshape(-1, 1)

        ent_coef_loss = None
        if self.ent_coef_optimizer is not None and self.log_ent_coef is not None:
            # Important: detach the variable from the graph
            # so we don't change it with other losses
            # see https://github.com/rail-berkeley/softlearning/issues/60
            ent_coef = th.exp(self.log_ent_coef.detach())
            # A float in SB3's SAC, a numpy float32 in sb3-contrib's TQC: either is what its own train adds.
            ent_coef_loss = -(self.log_ent_coef * (log_prob + self.target_entropy).detach()).mean()  # type: ignore[operator]
        else:
            ent_coef = self.ent_coef_tensor

        # Optimize entropy coefficient, also called
        # entropy temperature or alpha in the paper
        if ent_coef_loss is not None and self.ent_coef_optimizer is not None:
            self.ent_coef_optimizer.zero_grad()
            ent_coef_loss.backward()
            self.ent_coef_optimizer.step()
        return PolicySample(actions_pi, log_prob, ent_coef, ent_coef_loss)

    def _critic_step(
        self, replay_data: Any, critic_loss_of: CriticLoss, policy_sample: PolicySample
    ) -> tuple[th.Tensor, CriticStep]:
        """
        SB3's critic step, on the critic's batch, with the loss the replay scheme gives it.

        :param replay_data: the critic's batch
        :param critic_loss_of: its loss, from the critics' Q-values and the TD targets
        :param policy_sample: the entropy step's output (its entropy coefficient enters the targets)
        :return: the critic loss, and what the step computed (Q-values and targets of the same forward pass)
        """
        ent_coef = policy_sample.ent_coef
        # For n-step replay, discount factor is gamma**n_steps (when no early termination)
        discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma

        with th.no_grad():
            # Select action according to policy
            next_actions, next_log_prob = self.actor.action_log_prob(replay_data.next_observations)
            # Compute the next Q values: min over all critics targets
            next_q_values = th.cat(self.critic_target(replay_data.next_observations, next_actions), dim=1)
            next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
            # add entropy term
            next_q_values = next_q_values - ent_coef * next_log_prob.reshape(-1, 1)
            # td error + entropy term
            target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values

        # Get current Q-values estimates for each critic network
        # using action from the replay buffer
        current_q_values = self.critic(replay_data.observations, replay_data.actions)

        # Compute critic loss (PER: as the replay scheme says)
        critic_loss = critic_loss_of(current_q_values, target_q_values)

        # Optimize the critic
        self.critic.optimizer.zero_grad()
        critic_loss.backward()
        self.critic.optimizer.step()
        return critic_loss, CriticStep(replay_data, current_q_values, target_q_values)

    def _actor_step(self, replay_data: Any, policy_sample: PolicySample, weights: th.Tensor | None) -> th.Tensor:
        """
        SB3's actor step, on the actor's batch (the one the entropy step sampled actions for).

        :param replay_data: the actor's batch
        :param policy_sample: the entropy step's output
        :param weights: a weight per sample of the loss, as the replay scheme says (``None``: SB3's mean)
        :return: the actor loss
        """
        # Compute actor loss
        # Alternative: actor_loss = th.mean(log_prob - qf1_pi)
        # Min over all critic networks
        q_values_pi = th.cat(self.critic(replay_data.observations, policy_sample.actions_pi), dim=1)
        min_qf_pi, _ = th.min(q_values_pi, dim=1, keepdim=True)
        actor_loss = weighted_mean(policy_sample.ent_coef * policy_sample.log_prob - min_qf_pi, weights)

        # Optimize the actor
        self.actor.optimizer.zero_grad()
        actor_loss.backward()
        self.actor.optimizer.step()
        return actor_loss


class SAC(SACTrainingSteps, stable_baselines3.SAC):
    """
    Soft Actor-Critic (SAC) that makes use of a ``PrioritizedReplayBuffer``: a drop-in subclass of
    ``stable_baselines3.SAC``.

    With a ``PrioritizedReplayBuffer`` (``replay_buffer_class=PrioritizedReplayBuffer``), each gradient step trains
    as its ``replay_scheme`` says (``sb3_per.schemes``), ``PER()`` by default:

    - the critic loss is weighted by the sampled importance-sampling weights ``w``:
      ``0.5 * sum_i mean(w * (Q_i - y) ** 2)`` (the actor and entropy losses are unchanged), and
    - after the critic's optimizer step, the priorities of the sampled transitions are written back from the
      TD errors of that same forward pass.

    Each training call also logs the scheme's keys (``PER``: ``train/per_beta``, ``train/per_weight_mean``,
    ``train/per_priority_mean``, ``train/per_priority_max``).

    With any other replay buffer and ``replay_scheme=None`` it is exactly ``stable_baselines3.SAC``: its ``train``
    runs unchanged.

    :param policy: The policy model to use (MlpPolicy, CnnPolicy, ...)
    :param env: The environment to learn from (if registered in Gym, can be str)
    :param learning_rate: learning rate for adam optimizer,
        the same learning rate will be used for all networks (Q-Values, Actor and Value function)
        it can be a function of the current progress remaining (from 1 to 0)
    :param buffer_size: size of the replay buffer
    :param learning_starts: how many steps of the model to collect transitions for before learning starts
    :param batch_size: Minibatch size for each gradient update
    :param tau: the soft update coefficient ("Polyak update", between 0 and 1)
    :param gamma: the discount factor
    :param train_freq: Update the model every ``train_freq`` steps. Alternatively pass a tuple of frequency and unit
        like ``(5, "step")`` or ``(2, "episode")``.
    :param gradient_steps: How many gradient steps to do after each rollout (see ``train_freq``)
        Set to ``-1`` means to do as many gradient steps as steps done in the environment
        during the rollout.
    :param action_noise: the action noise type (None by default), this can help
        for hard exploration problem. Cf common.noise for the different action noise type.
    :param replay_buffer_class: Replay buffer class to use: ``PrioritizedReplayBuffer`` for prioritized
        replay. If ``None``, it will be automatically selected (uniform replay, as in SB3).
    :param replay_buffer_kwargs: Keyword arguments to pass to the replay buffer on creation
        (for ``PrioritizedReplayBuffer``: ``alpha``, ``beta_start``, ``beta_end``, ``beta_anneal_steps``, ...).
    :param optimize_memory_usage: Enable a memory efficient variant of the replay buffer
        at a cost of more complexity.
        See https://github.com/DLR-RM/stable-baselines3/issues/37#issuecomment-637501195
    :param n_steps: When n_step > 1, uses n-step return (with the NStepReplayBuffer) when updating the Q-value network.
        Note: it is only used when ``replay_buffer_class`` is ``None``. Samples that carry ``discounts``
        are honoured with either kind of buffer.
    :param ent_coef: Entropy regularization coefficient. (Equivalent to
        inverse of reward scale in the original SAC paper.)  Controlling exploration/exploitation trade-off.
        Set it to 'auto' to learn it automatically (and 'auto_0.1' for using 0.1 as initial value)
    :param target_update_interval: update the target network every ``target_network_update_freq``
        gradient steps.
    :param target_entropy: target entropy when learning ``ent_coef`` (``ent_coef = 'auto'``)
    :param use_sde: Whether to use generalized State Dependent Exploration (gSDE)
        instead of action noise exploration (default: False)
    :param sde_sample_freq: Sample a new noise matrix every n steps when using gSDE
        Default: -1 (only sample at the beginning of the rollout)
    :param use_sde_at_warmup: Whether to use gSDE instead of uniform sampling
        during the warm up phase (before learning starts)
    :param stats_window_size: Window size for the rollout logging, specifying the number of episodes to average
        the reported success rate, mean episode length, and mean reward over
    :param tensorboard_log: the log location for tensorboard (if None, no logging)
    :param policy_kwargs: additional arguments to be passed to the policy on creation
    :param verbose: Verbosity level: 0 for no output, 1 for info messages (such as device or wrappers used), 2 for
        debug messages
    :param seed: Seed for the pseudo random generators
    :param device: Device (cpu, cuda, ...) on which the code should be run.
        Setting it to auto, the code will be run on the GPU if possible.
    :param replay_scheme: What each gradient step trains on, its critic loss and its priorities: ``PER()``,
        ``LAP()``, ``PAL()``, ``LA3P()``, ``ReLo()``, ``ExpectedTD()`` or ``ExpectedReLo()`` (``sb3_per.schemes``,
        one class per paper, each with its parameters); ``UPER`` needs TQC's quantile critics and is refused.
        ``None`` (default): ``PER()`` with a prioritized buffer, SB3's own training with any other
    :param _init_setup_model: Whether or not to build the network at the creation of the instance
    """

    __init__ = constructor_with_replay_scheme(stable_baselines3.SAC)
