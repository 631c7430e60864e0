"""Reads a folder of equal-size samples through torch's DataLoader (2 worker processes, batch
16, shuffle) and prints, per epoch, each sample's index and SHA-256 as JSON. Run by
test_read_paths.test_pytorch_dataloader with Debian's /usr/bin/python3 (python3-torch)."""

import hashlib
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __init__(self, root, count):
        self.paths = [os.path.join(root, f"s{i:03d}.bin") for i in range(count)]

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        with open(self.paths[i], "rb") as f:
            data = f.read()
        return i, torch.frombuffer(bytearray(data), dtype=torch.uint8)


def main():
    root, count = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(1234)
    loader = DataLoader(Samples(root, count), batch_size=16, shuffle=True, num_workers=2)
    epochs, batch_sizes, sample_len = [], [], None
    for epoch in range(2):
        seen = []
        for indices, batch in loader:
            if epoch == 0:
                batch_sizes.append(int(batch.shape[0]))
            sample_len = int(batch.shape[1])
            for i, row in zip(indices.tolist(), batch):
                seen.append([i, hashlib.sha256(row.numpy().tobytes()).hexdigest()])
        epochs.append(seen)
    json.dump({"epochs": epochs, "batch_sizes": batch_sizes, "sample_len": sample_len},
              sys.stdout)


if __name__ == "__main__":
    main()
