#!/usr/bin/env python3
"""Writes the handwritten-digits split the digits models are trained and tested on.

    make_data.py OUTDIR

The data is scikit-learn's `load_digits` (1,797 8x8 images, 10 classes), which
ships inside the scikit-learn wheel: nothing is downloaded. Pixels 0..16 are
scaled to [0, 1] and laid out as [N, 1, 8, 8] float32. A fixed, stratified
split keeps 30% (540 samples) held out:

    train.npz   x [1257,1,8,8] float32, y [1257] int64   (training; calibration)
    calib.npy   x of the first 256 training samples      (calibrate --data)
    test.npy    x [540,1,8,8] float32                    (eval --data)
    test_labels.npy  y [540] int64                       (eval --labels)

The committed files in tests/models/digits/ were made by this script with
scikit-learn 1.9.1; CI reads them and never needs scikit-learn.
"""
import os
import sys

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out, exist_ok=True)
    d = load_digits()
    x = (d.data.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.3, random_state=0, stratify=y)
    np.savez(os.path.join(out, "train.npz"), x=xtr, y=ytr)
    np.save(os.path.join(out, "calib.npy"), xtr[:256])
    np.save(os.path.join(out, "test.npy"), xte)
    np.save(os.path.join(out, "test_labels.npy"), yte)
    print(f"train {len(xtr)}, test {len(xte)} -> {out}")


if __name__ == "__main__":
    main()
