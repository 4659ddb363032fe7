"""
Source: https://github.com/MorvanZhou/PyTorch-Tutorial/issues/57
Thread: "403: question about h_state = h_state.data"
What the user did: in the RNN regression tutorial (predicting cos from sin), they
commented out the line that re-wraps the returned hidden state with .data before the
next step, so h_state carried the previous step's graph into the next loss and
loss.backward() failed with "Trying to backward through the graph a second time".
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class RNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(input_size=1, hidden_size=8, num_layers=1, batch_first=True)
        self.out = nn.Linear(8, 1)

    def forward(self, x, h_state):
        r_out, h_state = self.rnn(x, h_state)
        return self.out(r_out), h_state


rnn = RNN()
optimizer = optim.Adam(rnn.parameters(), lr=0.02)
loss_func = nn.MSELoss()

h_state = None
for step in range(2):
    start, end = step * 3.14159, (step + 1) * 3.14159
    steps = torch.linspace(start, end, 10)
    x = torch.sin(steps).view(1, 10, 1)
    y = torch.cos(steps).view(1, 10, 1)

    prediction, h_state = rnn(x, h_state)
    # h_state = h_state.detach()   <- the line the user removed
    loss = loss_func(prediction, y)
    optimizer.zero_grad()
    loss.backward()  # CULPRIT (step 0) # RAISES (step 1)
    optimizer.step()

# EXPECT: h_state
