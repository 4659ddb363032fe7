"""
Source: https://github.com/sgadgil6/cnslab_fmri/issues/4
Thread: "Trying to backward through the graph a second time, but the saved intermediate
results have already been freed. Specify retain_graph=True when calling backward the
first time."
What the user did: ran the repo's LSTM training script for fMRI data; loss.backward()
failed on the second batch, and retain_graph=True ran out of memory. The model keeps its
LSTM state in self.hidden and feeds it back in on every forward; the posted fix stops
passing the stored hidden state to the LSTM.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

torch.manual_seed(0)


class fMRI_LSTM(nn.Module):
    def __init__(self, hidden_dim, input_dim, batch_size):
        super().__init__()
        self.hidden_dim = hidden_dim
        self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers=1, batch_first=True)
        self.linear = nn.Linear(hidden_dim, 1)
        self.hidden = self.init_hidden(batch_size)

    def init_hidden(self, batch_size):
        return (torch.randn(1, batch_size, self.hidden_dim), torch.randn(1, batch_size, self.hidden_dim))

    def forward(self, x):
        lstm_out, self.hidden = self.lstm(x, self.hidden)
        return torch.sigmoid(self.linear(lstm_out[:, -1, :]))


model = fMRI_LSTM(hidden_dim=8, input_dim=5, batch_size=4)
optimizer = optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.BCELoss()

for batch in range(2):
    x = torch.randn(4, 6, 5)
    y = torch.randint(0, 2, (4, 1)).float()
    out = model(x)
    loss = criterion(out, y)
    optimizer.zero_grad()
    loss.backward()  # CULPRIT (batch 0) # RAISES (batch 1)
    optimizer.step()

# EXPECT: model.hidden
