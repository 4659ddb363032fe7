"""Lab 5 · A hidden state carried across batches (MorvanZhou/PyTorch-Tutorial#57)."""
import math

import torch
from torch import nn, optim

from gan_lessons.exercises.lesson13.grading import LABS, Lab, add_lab, lab_exercise
from gan_lessons.exercises.steps import parameter_names
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(input_size=1, hidden_size=8, num_layers=1, batch_first=True)
        self.out = nn.Linear(8, 1)

    def forward(self, x, h_state):
        r_out, h_state = self.rnn(x, h_state)
        return self.out(r_out), h_state


def _rnn_problem():
    torch.manual_seed(5)
    rnn = RNN()
    optimizer = optim.Adam(rnn.parameters(), lr=0.02)
    return (lambda k: (rnn, optimizer, nn.MSELoss(), 3), {"optimizer": optimizer}, parameter_names(rnn=rnn), {})


def reference_rnn_train(rnn, optimizer, loss_func, steps):
    """The tutorial's loop: the hidden state carried on, cut from the previous step's graph."""
    h_state = None
    for step in range(steps):
        start, end = step * math.pi, (step + 1) * math.pi
        t = torch.linspace(start, end, 10)
        x, y = torch.sin(t).view(1, 10, 1), torch.cos(t).view(1, 10, 1)
        prediction, h_state = rnn(x, h_state)
        h_state = h_state.detach()
        loss = loss_func(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


_rnn_reset = variant(reference_rnn_train, drop="h_state = h_state.detach()",   # a fresh state at every step
                     replace={"rnn(x, h_state)": "rnn(x, None)"})


add_lab(Lab("rnn", "a hidden state carried across batches", _rnn_problem, reference_rnn_train, calls=1, mistakes=[
    (_rnn_reset, N_("the state starts afresh at every step (as from None or zeros), which makes the error go away "
                    "and changes what the RNN computes"))]))


# What a student's copy may not say before this lab's grader passes (words that name the bug or its fix, in either
# language, matched without case), and what no grader message may print (the fix's code).
TELLS = ("detach", "h_state.data", "cut it", "cuts it", "retain_graph", "切断", "分离")
FIX_CODE = ("h_state.detach()", "h_state = h_state.data", "h_state.data")


# Lab 5. train(rnn, optimizer, loss_func, steps) with steps=3.
TRAIN_RNN = lab_exercise("train_rnn", reference_rnn_train, LABS["rnn"], N_(
    "all three steps run, on the reference's gradients: the state is carried on, cut from the previous "
    "step's graph"))
check_rnn_train = TRAIN_RNN.check
