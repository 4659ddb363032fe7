"""
Source: https://github.com/haofanwang/Score-CAM/issues/28
Thread: "RuntimeError: Output 0 of UnbindBackward is a view and is being modified inplace ..."
What the user did: undid an image's normalisation channel by channel, in place, walking the channels with a for
loop (`for channel, mean, std in zip(image[0], means, stds): channel.mul_(std).add_(mean)`), on an image that
carries a graph. Iterating a tensor unbinds it into views that one op returned together, and autograd forbids
writing into those in place (paarthneekhara/AdversarialDeepFakes#23 is the same in an adversarial attack).
Outside GAN training: attribution maps and adversarial examples, where the input image requires grad.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)
means, stds = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def denormalize(image):
    out = image.clone()
    for channel, mean, std in zip(out[0], means, stds):  # CULPRIT
        channel.mul_(std).add_(mean)  # CULPRIT
    return out


model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                      nn.Linear(8, 10))
image = torch.rand(1, 3, 16, 16, requires_grad=True)
score = model(image)[0, 3]
score.backward()
saliency = image.grad.abs().amax(1)
shown = denormalize(image + 0.01 * image.grad.sign())  # RAISES
print(float(shown.mean()), float(saliency.mean()))

# EXPECT: channel
