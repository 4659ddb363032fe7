"""
Source: https://github.com/lucidrains/denoising-diffusion-pytorch/issues/109
Thread: "RuntimeError: Trying to backward through the graph a second time"
What the reporter found: training a 1-D diffusion model, the first `loss.backward()` ran and the second failed. Their
own explanation, which closed the issue: "I use a conv1D() to convert my data to the shape of the network's input,
which is out of the training loop." So the data set is the output of an nn.Conv1d applied once, before training:
every batch drawn from it is a slice of that one graph, and the first backward frees it. That conv is not part of
the diffusion model and is in no optimizer; it is preprocessing, so the fix is to run it under torch.no_grad() (or
detach its output) before building the data set. Running the conv again inside the loop would also silence the
error, but it would keep sending gradients into a conv that nothing trains. Outside GAN training: a denoising
diffusion model on 1-D signals.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class Unet1D(nn.Module):
    """A small stand-in for the package's Unet1D(dim, channels)."""

    def __init__(self, dim=8, channels=2):
        super().__init__()
        self.channels = channels
        self.time = nn.Linear(1, dim)
        self.inp = nn.Conv1d(channels, dim, 3, padding=1)
        self.out = nn.Conv1d(dim, channels, 3, padding=1)

    def forward(self, x, t):
        h = F.silu(self.inp(x) + self.time(t.float()[:, None] / 100)[:, :, None])
        return self.out(h)


class GaussianDiffusion1D(nn.Module):
    def __init__(self, model, seq_length=16, timesteps=100):
        super().__init__()
        self.model, self.seq_length, self.num_timesteps = model, seq_length, timesteps
        betas = torch.linspace(1e-4, 0.02, timesteps)
        alphas_cumprod = torch.cumprod(1. - betas, 0)
        self.register_buffer('sqrt_ac', alphas_cumprod.sqrt())
        self.register_buffer('sqrt_1mac', (1 - alphas_cumprod).sqrt())

    def forward(self, img):
        b = img.shape[0]
        t = torch.randint(0, self.num_timesteps, (b,))
        noise = torch.randn_like(img)
        x = self.sqrt_ac[t][:, None, None] * img + self.sqrt_1mac[t][:, None, None] * noise
        return F.mse_loss(self.model(x, t), noise)


class Dataset1D(Dataset):
    def __init__(self, tensor):
        self.tensor = tensor.clone()

    def __len__(self):
        return len(self.tensor)

    def __getitem__(self, idx):
        return self.tensor[idx].clone()


raw = torch.rand(32, 1, 16)
to_model_shape = nn.Conv1d(1, 2, 1)
training_seq = to_model_shape(raw)
dataset = Dataset1D(training_seq)

model = Unet1D(dim=8, channels=2)
diffusion = GaussianDiffusion1D(model, seq_length=16, timesteps=100)
opt = torch.optim.Adam(diffusion.parameters(), lr=8e-5)
dl = DataLoader(dataset, batch_size=8, shuffle=True)
for step, data in zip(range(3), dl):
    loss = diffusion(data)
    loss.backward()  # CULPRIT (step 0) # RAISES (step 1)
    opt.step()
    opt.zero_grad()

# EXPECT: training_seq or dataset.tensor
