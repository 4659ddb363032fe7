"""
Source: https://github.com/abhiskk/fast-neural-style/issues/12
Thread: "About adding Tanh() at the end of the model"
What the reporter found: after adding nn.Tanh() as the last layer of the style-transfer network, training failed
with "one of the variables needed for gradient computation has been modified by an inplace operation". The cause:
the training loop passes the network's output y to `utils.subtract_imagenet_mean_batch(y)`, which subtracts the
ImageNet mean with `batch -= mean`, in place. Without the Tanh nothing had saved y; Tanh's backward saves its own
output, so the in-place subtraction spoils it. The fix in the repository (commit b5e3a47, "Remove inplace
subtraction"): the helper subtracts out of place and returns the result, and the loop does
`y = utils.subtract_imagenet_mean_batch(y)`. Outside GAN training: fast neural style transfer with a VGG loss.
"""
import torch
import torch.nn as nn
from torch.optim import Adam

torch.manual_seed(0)


class utils:
    @staticmethod
    def subtract_imagenet_mean_batch(batch):
        """Subtract the ImageNet mean, pixel-wise, from a BGR image batch."""
        tensortype = type(batch.data)
        mean = torch.zeros(batch.size())
        mean[:, 0, :, :] = 103.939
        mean[:, 1, :, :] = 116.779
        mean[:, 2, :, :] = 123.680
        batch -= mean  # CULPRIT

    @staticmethod
    def gram_matrix(y):
        (b, ch, h, w) = y.size()
        features = y.view(b, ch, w * h)
        return features.bmm(features.transpose(1, 2)) / (ch * h * w)


class TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.relu = nn.ReLU()
        self.deconv3 = nn.Conv2d(4, 3, 3, padding=1)
        self.tanh = nn.Tanh()

    def forward(self, X):
        y = self.relu(self.conv1(X))
        y = self.deconv3(y)
        return self.tanh(y)


class Vgg16(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1_1 = nn.Conv2d(3, 4, 3, padding=1)
        self.conv2_1 = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, X):
        h = torch.relu(self.conv1_1(X))
        relu1_2 = h
        h = torch.relu(self.conv2_1(h))
        relu2_2 = h
        return [relu1_2, relu2_2]


transformer = TransformerNet()
optimizer = Adam(transformer.parameters(), 1e-3)
mse_loss = torch.nn.MSELoss()
vgg = Vgg16()
for p in vgg.parameters():
    p.requires_grad_(False)

style_v = torch.rand(2, 3, 8, 8) * 255
utils.subtract_imagenet_mean_batch(style_v)
features_style = vgg(style_v)
gram_style = [utils.gram_matrix(y) for y in features_style]

for batch_id in range(2):
    x = torch.rand(2, 3, 8, 8) * 255
    optimizer.zero_grad()
    y = transformer(x)
    xc = x.data.clone()
    utils.subtract_imagenet_mean_batch(y)  # CULPRIT
    utils.subtract_imagenet_mean_batch(xc)
    features_y = vgg(y)
    features_xc = vgg(xc)
    f_xc_c = features_xc[1].data
    content_loss = 1.0 * mse_loss(features_y[1], f_xc_c)
    style_loss = 0.
    for m in range(len(features_y)):
        gram_s = gram_style[m].data
        gram_y = utils.gram_matrix(features_y[m])
        style_loss += 5.0 * mse_loss(gram_y, gram_s[:2, :, :])
    total_loss = content_loss + style_loss
    total_loss.backward()  # RAISES
    optimizer.step()

# EXPECT: y
