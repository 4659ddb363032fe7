"""
Source: https://github.com/2U1/Qwen-VL-Series-Finetune/pull/178
Thread: "[Fix] RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation."
What the user did: fine-tuned a vision-language model with QLoRA and gradient checkpointing. The text embeddings
are frozen, so the usual trick for checkpointing makes their output require grad (a forward hook calling
`output.requires_grad_(True)`): that output is then a leaf that requires grad. The model's forward merges the
image features into it in place through a flat view (`flat.index_copy_(0, row_idx, img)`), which is refused; the
fix made the copy out of place. Outside GAN training: vision-language fine-tuning with adapters.
"""
import torch
import torch.nn as nn

torch.manual_seed(0)


class VisionLanguageModel(nn.Module):
    def __init__(self, vocab=40, dim=16, image_token=3):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.visual = nn.Linear(12, dim)
        self.lm_head = nn.Linear(dim, vocab)
        self.image_token = image_token

    def forward(self, input_ids, pixel_values):
        inputs_embeds = self.embed_tokens(input_ids)
        img = self.visual(pixel_values)
        flat = inputs_embeds.view(-1, inputs_embeds.shape[-1])
        row_idx = (input_ids.view(-1) == self.image_token).nonzero().squeeze(1)
        flat.index_copy_(0, row_idx, img)  # CULPRIT RAISES
        return self.lm_head(inputs_embeds)


model = VisionLanguageModel()
model.embed_tokens.weight.requires_grad_(False)                       # frozen, as under QLoRA
model.embed_tokens.register_forward_hook(lambda module, args, output: output.requires_grad_(True))
optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
input_ids = torch.tensor([[5, 3, 3, 7, 9], [3, 3, 8, 2, 1]])
logits = model(input_ids, torch.randn(4, 12))
loss = logits.logsumexp(-1).mean()
optimizer.zero_grad()
loss.backward()
optimizer.step()

# EXPECT: inputs_embeds or flat
