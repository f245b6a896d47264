#!/usr/bin/env python3
"""test_npy_numpy.py - ogsh's .npy/.npz reader and writer against numpy's.

Usage: test_npy_numpy.py TEST_EXEC_IO

1. numpy writes .npy and .npz files of every dtype it shares with ONNX
   (np.save in formats 1.0, 2.0 and 3.0, Fortran order, big-endian,
   np.savez and np.savez_compressed, ml_dtypes' bfloat16 when installed)
   and files ogsh must refuse, listed in manifest.txt as
   "FILE ENTRY DTYPE SHAPE SUM" (ENTRY "-" for .npy files) or
   "FILE - error TEXT" (TEXT: a word of the expected message).
2. TEST_EXEC_IO FOLDER reads each one, checks dtype, shape and the sum of
   the elements, and writes each tensor back as FOLDER/out/tN.npy, listed
   in out/manifest.txt as "NAME FILE ENTRY DTYPE".
3. numpy loads those and compares them with what it wrote first.
Exit status 0 when everything matches, 77 (skipped) without numpy.
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:   # meson's "skipped"
    print('numpy is not installed: skipped')
    sys.exit(77)

try:
    import ml_dtypes
except ImportError:   # bfloat16 is optional
    ml_dtypes = None

# our dtype names for numpy's
NAMES = {
    'float32': 'float32', 'float64': 'float64', 'float16': 'float16',
    'int8': 'int8', 'int16': 'int16', 'int32': 'int32', 'int64': 'int64',
    'uint8': 'uint8', 'uint16': 'uint16', 'uint32': 'uint32', 'uint64': 'uint64',
    'bool': 'bool', 'complex64': 'complex64', 'complex128': 'complex128',
    'bfloat16': 'bfloat16',
}


def our_dtype(a):
    if a.dtype.kind in 'US':
        return 'string'
    return NAMES[np.dtype(a.dtype).newbyteorder('=').name]


def shape_str(a):
    return '[' + ','.join(str(d) for d in a.shape) + ']'


def checksum(a):
    """The sum test_exec_io.c computes: complex real + imaginary, strings
    their UTF-8 byte lengths."""
    if a.dtype.kind == 'U':
        return float(sum(len(s.encode('utf-8')) for s in a.ravel()))
    if a.dtype.kind == 'S':
        return float(sum(len(s.rstrip(b'\0')) for s in a.ravel()))
    if a.dtype.kind == 'c':
        return float(a.real.astype(np.float64).sum() + a.imag.astype(np.float64).sum())
    return float(a.astype(np.float64).sum())


def sample(dtype, shape, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape)) if shape else 1
    dt = np.dtype(dtype)
    if dt.kind == 'b':
        v = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in 'iu':
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, dtype=dt.newbyteorder('='), endpoint=True).astype(dt)
    elif dt.kind == 'c':
        v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    elif dt.kind == 'U':
        words = ['', 'a', 'hello', 'café', '€ 5', '😀!']
        v = np.array([words[(i + seed) % len(words)] for i in range(n)], dtype=dt)
    elif dt.kind == 'S':
        words = [b'', b'a', b'hello', b'x\x01y']
        v = np.array([words[(i + seed) % len(words)] for i in range(n)], dtype=dt)
    else:
        v = (rng.standard_normal(n) * 100).astype(dt)
    return v.reshape(shape)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix='npy_numpy.') as d:
        written = {}   # (file, entry) -> the array numpy wrote
        lines = []

        def add(file, entry, a):
            written[(file, entry)] = a
            lines.append(f'{file} {entry} {our_dtype(a)} {shape_str(a)} {checksum(a)!r}')

        def refuse(file, word):
            lines.append(f'{file} - error {word}')

        dtypes = ['float32', 'float64', 'float16', 'int8', 'int16', 'int32', 'int64', 'uint8',
                  'uint16', 'uint32', 'uint64', 'bool', 'complex64', 'complex128', '<U6', 'S5']
        shapes = [(), (0,), (3,), (2, 3, 4), (2, 0, 3)]
        k = 0
        for dt in dtypes:
            for shape in shapes:
                a = sample(dt, shape, k)
                name = f'a{k}.npy'
                np.save(os.path.join(d, name), a)
                add(name, '-', a)
                k += 1
        # other format versions
        for ver in [(2, 0), (3, 0)]:
            a = sample('float32', (3, 5), k)
            name = f'v{ver[0]}.npy'
            with open(os.path.join(d, name), 'wb') as f:
                np.lib.format.write_array(f, a, version=ver)
            add(name, '-', a)
            k += 1
        # Fortran order and big-endian
        for dt, shape in [('float32', (3, 4, 2)), ('int16', (2, 5)), ('<U3', (2, 3))]:
            a = np.asfortranarray(sample(dt, shape, k))
            name = f'fortran{k}.npy'
            np.save(os.path.join(d, name), a)
            add(name, '-', a)
            k += 1
        for dt in ['>f4', '>f8', '>i8', '>u2', '>c16', '>f2', '>U4']:
            a = sample(dt, (2, 3), k)
            name = f'big{k}.npy'
            np.save(os.path.join(d, name), a)
            add(name, '-', a)
            k += 1
        if ml_dtypes is not None:
            a = np.arange(-6, 6, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)
            np.save(os.path.join(d, 'bf16.npy'), a)
            add('bf16.npy', '-', a)
            np.save(os.path.join(d, 'f8.npy'), np.zeros(3, ml_dtypes.float8_e4m3fn))
            refuse('f8.npy', 'opaque')
        # archives
        for comp, save in [('stored', np.savez), ('deflate', np.savez_compressed)]:
            arrays = {'x': sample('float32', (4, 4), 1), 'layer.0.weight': sample('int64', (3,), 2),
                      'x/y': sample('<U4', (2,), 3), 'empty': sample('float16', (0, 2), 4),
                      'scalar': sample('float64', (), 5), 'flags': sample('bool', (7,), 6)}
            name = f'{comp}.npz'
            save(os.path.join(d, name), sample('int8', (5,), 7), **arrays)   # also arr_0
            add(name, 'arr_0', sample('int8', (5,), 7))
            for key, a in arrays.items():
                add(name, key, a)
        # files to refuse
        np.save(os.path.join(d, 'obj.npy'), np.array([{'a': 1}], dtype=object), allow_pickle=True)
        refuse('obj.npy', 'pickled')
        np.save(os.path.join(d, 'struct.npy'), np.zeros(2, dtype=[('a', '<f4'), ('b', '<i4')]))
        refuse('struct.npy', 'structured')
        np.save(os.path.join(d, 'dt.npy'), np.zeros(2, dtype='datetime64[s]'))
        refuse('dt.npy', 'unsupported dtype')
        with open(os.path.join(d, 'trunc.npy'), 'wb') as f:
            np.save(f, np.zeros(100, np.float32))
            f.truncate(f.tell() - 4)
        refuse('trunc.npy', 'truncated')

        with open(os.path.join(d, 'manifest.txt'), 'w') as f:
            f.write('\n'.join(lines) + '\n')

        r = subprocess.run([exe, d])
        if r.returncode != 0:
            print(f'{exe} {d} failed ({r.returncode})')
            return 1

        # what ogsh wrote back must load in numpy as what numpy wrote
        bad = 0
        back = 0
        with open(os.path.join(d, 'out', 'manifest.txt')) as f:
            for line in f:
                name, file, entry, dtype = line.split()
                orig = written[(file, entry)]
                got = np.load(os.path.join(d, 'out', name))
                want = orig
                if orig.dtype.kind == 'S':   # ogsh's strings are UTF-8; written as <U
                    want = np.char.decode(orig, 'latin-1').astype(str)
                if orig.dtype.kind != 'U' and orig.dtype.kind != 'S':
                    want = orig.astype(orig.dtype.newbyteorder('<'))
                ok = (got.shape == want.shape and got.dtype.kind == want.dtype.kind
                      and (got.dtype == want.dtype or want.dtype.kind == 'U')
                      and np.array_equal(got, want, equal_nan=want.dtype.kind in 'fc')
                      and got.flags.c_contiguous)
                if not ok:
                    print(f'{file} {entry}: written back as {got.dtype}{list(got.shape)}, '
                          f'expected {want.dtype}{list(want.shape)}')
                    bad += 1
                back += 1
        print(f'{back} tensors written back and loaded by numpy, {bad} differ')
        return 1 if bad or back == 0 else 0


if __name__ == '__main__':
    sys.exit(main())
